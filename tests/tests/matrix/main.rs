//! The combination matrix: every kind of hold × every request option and client setting ×
//! every topology, generated from one table ([`KINDS`] × [`OPTIONS`], one test per
//! topology, each topology started once). Each cell either works, with a behavioural
//! assertion, or answers a typed error the docs list for that combination
//! ([`LockError::InvalidRequest`] for a shared kind under Redlock,
//! [`LockError::InvalidConfig`] for `min_replicas` with Redlock) — never a Redis error such
//! as WRONGTYPE.

mod cells;
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
const OPTIONS: [Opt; 13] = [
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
}

/// The lease of the matrix's clients: short, so the watchdog must renew within a cell.
pub(crate) const LEASE: Duration = Duration::from_secs(2);
/// Cells of one topology running at once: enough to finish in seconds, few enough that a
/// loaded 2-core machine answers Redlock's 50 ms node timeouts.
const AT_ONCE: usize = 8;

/// The clients of one topology: the plain one, and one built with `min_replicas` (the
/// build's answer: Redlock refuses it).
pub(crate) struct Clients {
    pub(crate) topology: &'static str,
    pub(crate) plain: LockClient,
    /// Builds a client with `min_replicas`.
    pub(crate) replicated: Box<dyn Fn() -> Result<LockClient, LockError> + Send + Sync>,
}

impl Clients {
    fn new(
        topology: &'static str,
        builder: impl Fn() -> LockClientBuilder + Send + Sync + 'static,
    ) -> Self {
        let plain = builder().lease(LEASE).build().expect("valid client");
        let replicated = Box::new(move || {
            builder()
                .lease(LEASE)
                .min_replicas(1, Duration::from_secs(10))
                .build()
        });
        Self {
            topology,
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
    run_matrix(Clients::new("single", move || builder(&url))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = RedisCluster::start(3, 1);
    let seeds = cluster.seed_urls();
    let clients = Clients::new("cluster", move || {
        LockClient::cluster(seeds.clone()).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel() {
    let set = RedisSentinels::start();
    let sentinels = set.sentinel_urls();
    let clients = Clients::new("sentinel", move || {
        LockClient::sentinel(sentinels.clone(), SERVICE).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let clients = Clients::new("redlock", move || {
        LockClient::redlock(urls.clone()).command_timeout(Duration::from_secs(5))
    });
    run_matrix(clients).await;
}
