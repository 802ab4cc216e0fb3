//! The combination matrix: every kind of hold × every request option, client setting and
//! form × every topology, generated from one table ([`KINDS`] × [`OPTIONS`], one test per
//! topology, each topology started once). Each cell either works, with a behavioural
//! assertion, or answers a typed error the docs list for that combination
//! ([`refusal::documented`]: [`LockError::InvalidRequest`] for a shared kind or an election
//! under Redlock, and for a guarded write under a read hold or under Redlock, [`IdempotencyError::Redlock`](lock_core::idempotency::IdempotencyError::Redlock) for an
//! idempotency key there, [`LockError::InvalidConfig`] for required replica acknowledgements with Redlock, and
//! the layer's `500` for what the topology refuses) — never a Redis error such as WRONGTYPE.
//!
//! A cell that does not apply is an entry of [`NOT_APPLICABLE`], with why; none is skipped
//! silently:
//!
//! - `lock_all`: no layer form (a layer takes one lock per request);
//! - jobs: no `extend` (the body has no guard; `hold_at_most` is the lease), no layer;
//! - elections: no single attempt, explicit lease, request id, guarded run or on-lost,
//!   `extend`, macro or layer (a campaign waits until it leads, on the client's lease);
//! - idempotency keys: no wait (a duplicate is told to retry later), request id, re-entry
//!   or macro form.

mod cells;
mod forms;
mod hold;
mod job;
mod kind;
mod layer;
mod refusal;

use std::time::{Duration, Instant};

use distlock_tests::locks::builder;
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockClientBuilder, LockError, ReplicaAck};

use cells::Cell;
use kind::Kind;

/// The kinds of hold.
const KINDS: [Kind; 8] = [
    Kind::Lock,
    Kind::Read,
    Kind::Write,
    Kind::Semaphore,
    Kind::LockAll,
    Kind::Job,
    Kind::Election,
    Kind::Idempotency,
];

/// The request options, client settings and forms each kind meets.
const OPTIONS: [Opt; 16] = [
    Opt::Wait,
    Opt::TryAcquire,
    Opt::Lease,
    Opt::Watchdog,
    Opt::RequireReplicas,
    Opt::RequestId,
    Opt::OnLost,
    Opt::Run,
    Opt::Extend,
    Opt::Reentry,
    Opt::Metrics,
    Opt::ForceRelease,
    Opt::Inspect,
    Opt::GuardedWrite,
    Opt::Macro,
    Opt::Layer,
];

/// The cells that do not apply, each with why.
const NOT_APPLICABLE: [(Kind, Opt, &str); 15] = [
    (
        Kind::LockAll,
        Opt::Layer,
        "lock-tower's layers take one lock per request: none takes several names",
    ),
    (
        Kind::Job,
        Opt::Extend,
        "a job's body has no guard to extend: `hold_at_most` is its lease",
    ),
    (
        Kind::Job,
        Opt::Layer,
        "scheduled jobs are not requests: no layer runs them",
    ),
    (
        Kind::Election,
        Opt::TryAcquire,
        "a campaign waits until it leads: there is no single attempt",
    ),
    (
        Kind::Election,
        Opt::Lease,
        "a term has the client's lease, renewed by the watchdog: no explicit lease",
    ),
    (
        Kind::Election,
        Opt::RequestId,
        "a campaign records no request id",
    ),
    (
        Kind::Election,
        Opt::OnLost,
        "a leader has no guarded run: it races `Leadership::lost` itself",
    ),
    (
        Kind::Election,
        Opt::Run,
        "a leader has no guarded run: it races `Leadership::lost` itself",
    ),
    (
        Kind::Election,
        Opt::Extend,
        "a term has no explicit lease to extend: the watchdog renews it",
    ),
    (
        Kind::Election,
        Opt::Macro,
        "`#[distributed_lock]` does not campaign",
    ),
    (Kind::Election, Opt::Layer, "no layer campaigns"),
    (
        Kind::Idempotency,
        Opt::Wait,
        "`begin` never waits: a duplicate in flight is told to retry later",
    ),
    (
        Kind::Idempotency,
        Opt::RequestId,
        "the in-flight lock records no request id",
    ),
    (
        Kind::Idempotency,
        Opt::Reentry,
        "a key is one request: the protocol has no re-entry in a scope",
    ),
    (
        Kind::Idempotency,
        Opt::Macro,
        "`#[distributed_lock]` takes no idempotency key",
    ),
];

/// Why `opt` does not apply to `kind`, when the table says so.
fn not_applicable(kind: Kind, opt: Opt) -> Option<&'static str> {
    NOT_APPLICABLE
        .iter()
        .find(|(k, o, _)| (*k, *o) == (kind, opt))
        .map(|(_, _, why)| *why)
}

/// One option, setting or form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opt {
    Wait,
    TryAcquire,
    Lease,
    Watchdog,
    /// A client that requires a replica's acknowledgement (`ReplicaAck::Require`); the
    /// plain clients run the default (`ReplicaAck::Auto`), which waits for one on every
    /// topology here but Redlock: each has a replica.
    RequireReplicas,
    RequestId,
    OnLost,
    Run,
    Extend,
    Reentry,
    Metrics,
    ForceRelease,
    Inspect,
    /// A guarded write under the hold (`LockGuard::write`, or the current lock's
    /// `LockInfo::write` in a job's body).
    GuardedWrite,
    /// The kind taken by `#[distributed_lock]`.
    Macro,
    /// The kind taken by lock-tower's layer for it, on an axum `Router`.
    Layer,
}

/// The lease of the matrix's clients, and the explicit lease of the cells that let one run
/// out. Redlock's per-node timeout is a hundredth of the lease (at least 50 ms): its
/// clients get longer leases, so a loaded machine still answers in time (a 6 s lease's
/// 60 ms timed out twice with a fault-harness run beside the suite; 10 s gives 100 ms).
#[derive(Clone, Copy)]
pub(crate) struct Leases {
    pub(crate) client: Duration,
    pub(crate) short: Duration,
}

const LEASES: Leases = Leases {
    client: Duration::from_secs(2),
    short: Duration::from_millis(400),
};
const REDLOCK_LEASES: Leases = Leases {
    client: Duration::from_secs(20),
    short: Duration::from_secs(10),
};
/// How often the watchdog renews: well within either lease, so a cell sees a renewal soon.
const WATCHDOG_EVERY: Duration = Duration::from_millis(250);

/// Cells of one topology running at once: enough to finish in seconds, few enough that a
/// loaded 2-core machine answers Redlock's 50 ms node timeouts.
const AT_ONCE: usize = 8;

/// The clients of one topology: the plain one (default settings: on every topology but
/// Redlock, each acquisition waits for a replica), and one that requires a replica (the
/// build's answer: Redlock refuses it).
pub(crate) struct Clients {
    pub(crate) topology: &'static str,
    pub(crate) leases: Leases,
    pub(crate) plain: LockClient,
    /// Builds a client with `ReplicaAck::Require`.
    pub(crate) replicated: Box<dyn Fn() -> Result<LockClient, LockError> + Send + Sync>,
}

impl Clients {
    fn new(
        topology: &'static str,
        leases: Leases,
        builder: impl Fn() -> LockClientBuilder + Send + Sync + 'static,
    ) -> Self {
        let configured = move || {
            builder()
                .lease(leases.client)
                .watchdog_interval(WATCHDOG_EVERY)
        };
        let plain = configured().build().expect("valid client");
        let replicated = Box::new(move || {
            configured()
                .replica_ack(ReplicaAck::Require {
                    replicas: 1,
                    timeout: Duration::from_secs(10),
                })
                .build()
        });
        Self {
            topology,
            leases,
            plain,
            replicated,
        }
    }
}

/// Runs every applicable cell on `clients` at once, and fails listing every cell that
/// failed.
async fn run_matrix(clients: Clients) {
    distlock_tests::metrics::install();
    let started = Instant::now();
    let clients = std::sync::Arc::new(clients);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let (mut tasks, mut skipped) = (Vec::new(), 0);
    for kind in KINDS {
        for opt in OPTIONS {
            if not_applicable(kind, opt).is_some() {
                skipped += 1;
                continue;
            }
            let cell = Cell::new(std::sync::Arc::clone(&clients), kind, opt);
            let label = cell.label();
            let slot = std::sync::Arc::clone(&slots).acquire_owned();
            let task = tokio::spawn(async move {
                let _slot = slot.await.expect("never closed");
                cell.run().await
            });
            tasks.push((label, kind, opt, task));
        }
    }
    let (mut worked, mut typed, mut failed) = (0, Vec::new(), Vec::new());
    for (label, kind, opt, task) in tasks {
        match task.await {
            Ok(Ok(())) => worked += 1,
            Ok(Err(refusal)) if refusal::documented(clients.topology, kind, opt, &refusal) => {
                typed.push(format!("{label}: {refusal}"))
            }
            Ok(Err(refusal)) => failed.push(format!("{label}: undocumented error: {refusal}")),
            Err(panic) => failed.push(format!("{label}: {panic}")),
        }
    }
    println!(
        "matrix {}: {} cells, {worked} worked, {} answered a documented typed error, \
         {skipped} not applicable, in {:?}",
        clients.topology,
        KINDS.len() * OPTIONS.len(),
        typed.len(),
        started.elapsed()
    );
    for line in &typed {
        println!("  typed: {line}");
    }
    assert!(failed.is_empty(), "failed cells:\n{}", failed.join("\n"));
}

/// Every entry of the table names a kind and an option of the matrix, once.
#[test]
fn the_not_applicable_entries_are_cells_of_the_matrix() {
    for (i, (kind, opt, why)) in NOT_APPLICABLE.iter().enumerate() {
        assert!(
            KINDS.contains(kind) && OPTIONS.contains(opt),
            "{kind:?} × {opt:?}"
        );
        assert!(!why.is_empty());
        let again = NOT_APPLICABLE[i + 1..]
            .iter()
            .any(|(k, o, _)| (k, o) == (kind, opt));
        assert!(!again, "{kind:?} × {opt:?} listed twice");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    let master = RedisServer::start();
    let _replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
        .start();
    let url = master.url();
    run_matrix(Clients::new("single", LEASES, move || builder(&url))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = RedisCluster::start(3, 1);
    let seeds = cluster.seed_urls();
    let clients = Clients::new("cluster", LEASES, move || {
        LockClient::cluster(seeds.clone()).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel() {
    let set = RedisSentinels::start();
    let sentinels = set.sentinel_urls();
    let clients = Clients::new("sentinel", LEASES, move || {
        LockClient::sentinel(sentinels.clone(), SERVICE).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let clients = Clients::new("redlock", REDLOCK_LEASES, move || {
        LockClient::redlock(urls.clone()).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}
