//! The combination matrix: every kind of hold × every request option and client setting ×
//! every topology, generated from one table ([`KINDS`] × [`OPTIONS`], one test per
//! topology, each topology started once). Each cell either works, with a behavioural
//! assertion, or answers a typed error the docs list for that combination
//! ([`LockError::InvalidRequest`] for a shared kind under Redlock,
//! [`LockError::InvalidConfig`] for `min_replicas` with Redlock) — never a Redis error such
//! as WRONGTYPE.

mod cells;
mod forms;
mod hold;

use std::time::{Duration, Instant};

use distlock_tests::locks::builder;
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockClientBuilder, LockError};

use cells::Cell;
use hold::Kind;

/// The kinds of hold.
const KINDS: [Kind; 5] = [
    Kind::Lock,
    Kind::Read,
    Kind::Write,
    Kind::Semaphore,
    Kind::LockAll,
];

/// The request options and client settings each kind meets.
const OPTIONS: [Opt; 14] = [
    Opt::Wait,
    Opt::TryAcquire,
    Opt::Lease,
    Opt::Watchdog,
    Opt::MinReplicas,
    Opt::RequestId,
    Opt::OnLost,
    Opt::Run,
    Opt::Extend,
    Opt::Reentry,
    Opt::Metrics,
    Opt::ForceRelease,
    Opt::Inspect,
    Opt::Macro,
];

/// One option or setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opt {
    Wait,
    TryAcquire,
    Lease,
    Watchdog,
    MinReplicas,
    RequestId,
    OnLost,
    Run,
    Extend,
    Reentry,
    Metrics,
    ForceRelease,
    Inspect,
    /// The kind taken by `#[distributed_lock]`.
    Macro,
}

/// The lease of the matrix's clients, and the explicit lease of the cells that let one run
/// out. Redlock's per-node timeout is a hundredth of the lease (at least 50 ms): its
/// clients get longer leases, so a loaded machine still answers in time.
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
    short: Duration::from_secs(6),
};
/// How often the watchdog renews: well within either lease, so a cell sees a renewal soon.
const WATCHDOG_EVERY: Duration = Duration::from_millis(250);

/// Cells of one topology running at once: enough to finish in seconds, few enough that a
/// loaded 2-core machine answers Redlock's 50 ms node timeouts.
const AT_ONCE: usize = 8;

/// The clients of one topology: the plain one, and one built with `min_replicas` (the
/// build's answer: Redlock refuses it).
pub(crate) struct Clients {
    pub(crate) topology: &'static str,
    pub(crate) leases: Leases,
    pub(crate) plain: LockClient,
    /// Builds a client with `min_replicas`.
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
                .min_replicas(1, Duration::from_secs(10))
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

/// Runs every cell on `clients` at once, and fails listing every cell that failed.
async fn run_matrix(clients: Clients) {
    distlock_tests::metrics::install();
    let started = Instant::now();
    let clients = std::sync::Arc::new(clients);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut tasks = Vec::new();
    for kind in KINDS {
        for opt in OPTIONS {
            let cell = Cell::new(std::sync::Arc::clone(&clients), kind, opt);
            let (label, kind, opt) = (cell.label(), cell.kind(), cell.opt());
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
            Ok(Err(error)) if cells::documented(clients.topology, kind, opt, &error) => {
                typed.push(format!("{label}: {error}"))
            }
            Ok(Err(error)) => failed.push(format!("{label}: undocumented error: {error}")),
            Err(panic) => failed.push(format!("{label}: {panic}")),
        }
    }
    println!(
        "matrix {}: {} cells, {worked} worked, {} answered a documented typed error, in {:?}",
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
