//! Fault suite, guarded writes against the failure they exist for. A holder process A takes
//! a lock (watchdog, 1 s lease) and checks that it holds it; A is frozen (SIGSTOP) past its
//! lease, or Redis restarts without persistence under it; another client B takes the lock
//! and sets the stock beside it to 100; A is resumed and decrements the stock at once,
//! without checking again — a pause between the check and the write. A's guarded `DECR` is
//! refused every time (stock stays 100, A is told `Lost`): no stale write. The negative
//! control does the same with a plain `DECR`, and every one of its stale writes lands.
//! On one server, a Cluster (keys named with `LockGuard::key`), Sentinel, and across a
//! restart that loses the data and the functions library.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::fault::{lock_url, run_trials};
use distlock_tests::locks::GENEROUS;
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockClientBuilder, LockGuard};
use tokio::task::block_in_place;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
const LEASE: Duration = Duration::from_secs(1);
/// What B sets the stock to; a stale `DECR` of A's leaves 99.
const STOCK: i64 = 100;

/// How A writes once resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    /// `LockGuard::write`: refused unless the hold is current.
    Guarded,
    /// The negative control: a plain `DECR`.
    Plain,
}

impl Write {
    fn word(self) -> &'static str {
        match self {
            Self::Guarded => "guarded",
            Self::Plain => "plain",
        }
    }

    /// Trial `i`'s write: guarded and plain in turn, so both see the same load.
    fn of(i: usize) -> Self {
        if i.is_multiple_of(2) {
            Self::Guarded
        } else {
            Self::Plain
        }
    }
}

/// Where a trial locks: A's lock address and plain-write address (`fault::lock_url` words),
/// and B's client builder.
#[derive(Clone)]
struct Target {
    lock: String,
    plain: String,
    b: LockClientBuilder,
}

impl Target {
    fn single(server: &RedisServer) -> Self {
        Self {
            lock: server.url(),
            plain: server.url(),
            b: LockClient::builder(server.url()),
        }
    }
}

/// The fault A meets after its check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Frozen until B holds the lock (past A's lease).
    Pause,
    /// Frozen while its Redis restarts empty (no persistence); B takes the lock after.
    Restart,
}

/// What one trial saw.
struct Trial {
    write: Write,
    /// A's write landed: the stock is no longer what B set.
    stale: bool,
    /// A was told `Lost`.
    refused: bool,
    /// A's guarded write met an unavailable Redis first (its connection broke with the
    /// restart) and was tried again.
    retried: bool,
}

/// One trial on `name`; `server` is restarted for [`Fault::Restart`].
async fn trial(
    name: String,
    target: &Target,
    write: Write,
    fault: Fault,
    server: Option<&mut RedisServer>,
) -> Trial {
    let lease_ms = LEASE.as_millis().to_string();
    let args = [
        "guarded",
        &target.lock,
        &target.plain,
        &name,
        &lease_ms,
        write.word(),
    ]
    .map(String::from);
    let mut a = HolderProcess::spawn(HOLDER, &args);
    let ready = a.expect("READY", GENEROUS).await;
    assert_eq!(fields(&ready)["held"], "1", "{name}: A's check: {ready}");
    let token_a: u64 = fields(&ready)["token"].parse().unwrap();
    a.stop();
    if let Some(server) = server {
        block_in_place(|| server.restart());
    }
    // B is built after the fault: under a restart it connects to the new server.
    let b = target
        .b
        .clone()
        .lease(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard_b = (b.lock(name.as_str()).wait(LEASE + GENEROUS).await)
        .unwrap_or_else(|e| panic!("{name}: B did not get the lock while A was frozen: {e}"));
    if fault == Fault::Pause {
        assert!(guard_b.fencing_token() > token_a, "{name}: B's token");
    }
    let stock = guard_b.key("stock");
    let mut set = redis::pipe();
    set.cmd("SET").arg(&stock).arg(STOCK);
    let _: redis::Value =
        (guard_b.write(&set).await).unwrap_or_else(|e| panic!("{name}: B's guarded SET: {e}"));

    a.cont();
    a.send("WRITE").await;
    let wrote = a.expect("WROTE", GENEROUS).await;
    let left = read_stock(&guard_b, &stock).await;
    assert!(
        !fields(&wrote)["write"].starts_with("error"),
        "{name}: A's write failed: {wrote}"
    );
    guard_b
        .release()
        .await
        .unwrap_or_else(|e| panic!("{name}: B's release: {e}"));
    let (status, _) = a.finish(GENEROUS).await;
    assert!(status.success(), "{name}: A exited with {status}");
    Trial {
        write,
        stale: left != Some(STOCK),
        refused: fields(&wrote)["write"] == "lost",
        retried: fields(&wrote).get("retries").is_some_and(|n| *n != "0"),
    }
}

/// The stock as B's hold reads it.
async fn read_stock(guard: &LockGuard, stock: &str) -> Option<i64> {
    let mut get = redis::pipe();
    get.cmd("GET").arg(stock);
    let (left,): (Option<i64>,) = guard.write(&get).await.expect("B reads the stock");
    left
}

/// `trials` trials (guarded and plain in turn), `concurrency` at a time, on `target`.
async fn pause_trials(topology: &str, target: Target, trials: usize, concurrency: usize) {
    let target = Arc::new(target);
    let seen = run_trials(trials, concurrency, |i| {
        let (target, name) = (Arc::clone(&target), format!("gw_{topology}_{i}"));
        async move { trial(name, &target, Write::of(i), Fault::Pause, None).await }
    })
    .await;
    report(topology, &seen);
}

/// Prints the stale writes, guarded against plain, and asserts: none guarded (each told
/// `Lost`), every plain one (the control fires).
fn report(topology: &str, trials: &[Trial]) {
    let count = |write: Write, what: fn(&Trial) -> bool| {
        let of: Vec<&Trial> = trials.iter().filter(|t| t.write == write).collect();
        (of.iter().filter(|t| what(t)).count(), of.len())
    };
    let (guarded_stale, guarded) = count(Write::Guarded, |t| t.stale);
    let (refused, _) = count(Write::Guarded, |t| t.refused);
    let (retried, _) = count(Write::Guarded, |t| t.retried);
    let (plain_stale, plain) = count(Write::Plain, |t| t.stale);
    println!(
        "faults::guarded_write {topology}: stale writes guarded {guarded_stale}/{guarded} \
         (refused as Lost {refused}/{guarded}, {retried} of them after an unavailable \
         first try), plain {plain_stale}/{plain}"
    );
    assert_eq!(guarded_stale, 0, "{topology}: a guarded stale write landed");
    assert_eq!(
        refused, guarded,
        "{topology}: a guarded write not told Lost"
    );
    assert_eq!(
        plain_stale, plain,
        "{topology}: the control's plain stale writes did not all land"
    );
}

/// 100 trials, 8 at a time: 50 guarded, 50 plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_writes_nothing_on_one_server() {
    let server = RedisServer::start();
    pause_trials("single", Target::single(&server), 100, 8).await;
}

/// 30 trials, 6 at a time, on three masters: each name's stock key in its lock's slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_writes_nothing_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let seeds = cluster.seed_urls();
    let target = Target {
        lock: lock_url::cluster(&seeds),
        plain: lock_url::cluster(&seeds),
        b: LockClient::cluster(seeds).command_timeout(Duration::from_secs(5)),
    };
    pause_trials("cluster", target, 30, 6).await;
}

/// 30 trials, 6 at a time, through three Sentinels (A's plain write goes to the master).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_writes_nothing_through_sentinel() {
    let set = RedisSentinels::start();
    let sentinels = set.sentinel_urls();
    let master = set.master_port().expect("the sentinels name a master");
    let target = Target {
        lock: lock_url::sentinel(SERVICE, &sentinels),
        plain: format!("redis://127.0.0.1:{master}"),
        b: LockClient::sentinel(sentinels, SERVICE).command_timeout(Duration::from_secs(5)),
    };
    pause_trials("sentinel", target, 30, 6).await;
}

/// 20 trials, 4 at a time, each on its own server: A checked its hold; the server restarts
/// empty (lock, fence counter and functions library gone); B takes the lock (its token from
/// a new counter; the record's owner differs from A's whatever the tokens) and A's guarded
/// write — its first try meets the broken connection, its retry the new hold — is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_writes_nothing_after_a_restart_without_persistence() {
    let seen = run_trials(20, 4, |i| async move {
        let mut server = RedisServer::start();
        let target = Target::single(&server);
        let name = format!("gw_restart_{i}");
        trial(
            name,
            &target,
            Write::of(i),
            Fault::Restart,
            Some(&mut server),
        )
        .await
    })
    .await;
    report("restart", &seen);
}
