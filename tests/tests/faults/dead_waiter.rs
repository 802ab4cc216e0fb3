//! Fault suite, dead waiters: a waiter process SIGKILLed while it waits — just queued, after
//! a long wait, or with its grant published but not yet read — never blocks the name for a
//! lease. Each trial measures the time from the holder's release to the next live waiter's
//! grant, for every kind that queues, on one server and on a Cluster; it must stay within
//! [`BOUND`] (the promise: one claim, 1.5 s, and the live waiter's retry).
//!
//! The control kills the waiter only after it read its grant and extended it: a dead
//! *holder*, which blocks the name for its lease, as a hand-off to a dead waiter did before
//! claims — and the same measure sees it.
//!
//! `DISTLOCK_DEAD_WAITER_TRIALS=30` runs that many trials per kind and kill point and prints
//! the p50 and max of each (the lab log's figures); CI runs one.

use std::time::Duration;

use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::fault::lock_url::{self, plain_query};
use distlock_tests::locks::{lock_key, GENEROUS};
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockGuard, LockRequest};
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
/// What a trial may take from release to the next grant, with room for a loaded machine:
/// the control's lease is far beyond it.
const BOUND: Duration = Duration::from_secs(4);
/// The dead holder's lease in the control.
const CONTROL_LEASE: Duration = Duration::from_secs(10);
/// Long enough for a waiter to have refreshed its place a few times.
const LONG_WAIT: Duration = Duration::from_millis(3_500);

/// Where in its wait the waiter dies.
#[derive(Clone, Copy, Debug)]
enum Kill {
    JustQueued,
    LongWait,
    /// Frozen (SIGSTOP) before the release, so its grant is published to a live connection
    /// and never read; killed after the release.
    GrantInFlight,
}

/// The kind of hold the dying waiter and the live one after it ask for, and what the test
/// holds meanwhile.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Exclusive,
    /// The dying waiter reads behind a writer; the live one writes (it cannot share).
    Read,
    /// The dying waiter writes behind a writer; the live one reads.
    Write,
    Permit,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Exclusive, Kind::Read, Kind::Write, Kind::Permit];

    /// The holder binary's mode argument for the dying waiter.
    fn mode(self) -> &'static [&'static str] {
        match self {
            Kind::Exclusive => &[],
            Kind::Read => &["read"],
            Kind::Write => &["write"],
            Kind::Permit => &["sem:1"],
        }
    }

    fn held(self, locks: &LockClient, name: &str) -> LockRequest {
        match self {
            Kind::Exclusive => locks.lock(name),
            Kind::Read | Kind::Write => locks.write_lock(name),
            Kind::Permit => locks.semaphore(name, 1),
        }
    }

    fn live_waiter(self, locks: &LockClient, name: &str) -> LockRequest {
        match self {
            Kind::Exclusive => locks.lock(name),
            Kind::Read => locks.write_lock(name),
            Kind::Write => locks.read_lock(name),
            Kind::Permit => locks.semaphore(name, 1),
        }
    }

    fn queue(self, name: &str) -> String {
        let prefix = match self {
            Kind::Exclusive => "distlock__wait:",
            Kind::Read | Kind::Write => "distlock__rwwait:",
            Kind::Permit => "distlock__semwait:",
        };
        format!("{prefix}{{{}}}", lock_key(name))
    }
}

/// Live waiters queued (each has an arrival entry below the deadline entries).
async fn queued(word: &str, queue: &str) -> usize {
    let mut count = redis::pipe();
    count
        .cmd("ZCOUNT")
        .arg(queue)
        .arg("-inf")
        .arg("(4500000000000000");
    let (n,): (usize,) = plain_query(word, &count).await.expect("ZCOUNT");
    n
}

async fn wait_queued(word: &str, queue: &str, n: usize) {
    let deadline = Instant::now() + GENEROUS;
    while queued(word, queue).await < n {
        assert!(
            Instant::now() < deadline,
            "{queue}: {n} waiters never queued"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn client(word: &str) -> LockClient {
    lock_url::builder(word)
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("a client")
}

/// One trial: the time from the release of the test's hold to the live waiter's grant.
/// `word` is the clients' topology, `query` where the test reads the lock's keys (the same
/// but for Sentinel, whose master is read by its URL).
async fn trial(word: &str, query: &str, kind: Kind, kill: Option<Kill>, n: usize) -> Duration {
    let base = format!("dw_{kind:?}_{kill:?}_{n}_");
    let name = format!("{base}0");
    let (holder, live) = (client(word), client(word));
    let held = kind.held(&holder, &name).await.expect("the test holds it");
    let lease = match kill {
        Some(_) => "30000".to_owned(),
        None => CONTROL_LEASE.as_millis().to_string(),
    };
    let mut args = vec![
        "many".to_owned(),
        word.to_owned(),
        "-".to_owned(),
        base,
        lease,
    ];
    args.push("1".to_owned());
    args.extend(kind.mode().iter().map(|m| (*m).to_owned()));
    let mut dying = HolderProcess::spawn(HOLDER, &args);
    let queue = kind.queue(&name);
    wait_queued(query, &queue, 1).await;
    let waiting = tokio::spawn({
        let request = kind.live_waiter(&live, &name);
        async move {
            let guard = request.wait(Duration::from_secs(60)).await;
            (Instant::now(), guard)
        }
    });
    wait_queued(query, &queue, 2).await;
    match kill {
        Some(Kill::JustQueued) => dying.kill().await,
        Some(Kill::LongWait) => {
            tokio::time::sleep(LONG_WAIT).await;
            dying.kill().await;
        }
        Some(Kill::GrantInFlight) => dying.stop(),
        None => {}
    }
    let released_at = Instant::now();
    held.release().await.expect("the test releases");
    match kill {
        Some(Kill::GrantInFlight) => dying.kill().await,
        None => {
            // The control: the waiter took its grant and extended it, then dies.
            dying.expect("HELD", GENEROUS).await;
            wait_extended(query, &name, kind).await;
            dying.kill().await;
        }
        _ => {}
    }
    let (granted_at, guard) = tokio::time::timeout(CONTROL_LEASE + GENEROUS, waiting)
        .await
        .expect("the live waiter is granted")
        .expect("the waiting task");
    let guard: LockGuard = guard.expect("granted");
    guard.release().await.expect("released");
    drop(dying.into_lines(GENEROUS).await);
    granted_at - released_at
}

/// Waits until the hold taken by message was extended from its claim to its lease.
async fn wait_extended(word: &str, name: &str, kind: Kind) {
    let key = lock_key(name);
    let deadline = Instant::now() + GENEROUS;
    loop {
        let mut ttl = redis::pipe();
        ttl.cmd("PTTL").arg(&key);
        let (left,): (i64,) = plain_query(word, &ttl).await.expect("PTTL");
        if left > 2 * 1_500 {
            return;
        }
        assert!(Instant::now() < deadline, "{kind:?}: never extended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn trials() -> usize {
    std::env::var("DISTLOCK_DEAD_WAITER_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// Runs every kind × kill point `trials()` times on `word`, checks each against [`BOUND`]
/// and prints the p50 and max of each.
async fn every_kind_and_kill_point(word: &str, query: &str, topology: &str, kills: &[Kill]) {
    let mut over = Vec::new();
    for kind in Kind::ALL {
        for &kill in kills {
            let mut gaps = Vec::new();
            for n in 0..trials() {
                gaps.push(trial(word, query, kind, Some(kill), n).await);
            }
            gaps.sort();
            let max = *gaps.last().expect("one trial at least");
            println!(
                "dead waiter {topology} {kind:?} {kill:?}: trials={} p50={:?} max={max:?}",
                gaps.len(),
                gaps[gaps.len() / 2]
            );
            if max > BOUND {
                over.push(format!("{kind:?} {kill:?}: {max:?}"));
            }
        }
    }
    assert!(over.is_empty(), "{topology}: over {BOUND:?}: {over:?}");
}

/// Every kind that queues, on one server, at every kill point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_never_blocks_the_name_for_a_lease() {
    let server = RedisServer::start();
    let kills = [Kill::JustQueued, Kill::LongWait, Kill::GrantInFlight];
    let url = server.url();
    every_kind_and_kill_point(&url, &url, "server", &kills).await;
}

/// The same on a Cluster (sharded pub/sub counts the waiter's subscription on the lock's
/// shard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_never_blocks_a_cluster_name_for_a_lease() {
    let cluster = RedisCluster::start(3, 0);
    let word = lock_url::cluster(&cluster.seed_urls());
    let kills = [Kill::JustQueued, Kill::GrantInFlight];
    every_kind_and_kill_point(&word, &word, "cluster", &kills).await;
}

/// The same through Sentinel (the master it names; plain pub/sub there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_never_blocks_a_sentinel_name_for_a_lease() {
    let set = RedisSentinels::start();
    let word = lock_url::sentinel(SERVICE, &set.sentinel_urls());
    let master = format!("redis://127.0.0.1:{}", set.master_port().expect("a master"));
    let kills = [Kill::JustQueued, Kill::GrantInFlight];
    every_kind_and_kill_point(&word, &master, "sentinel", &kills).await;
}

/// Control: a waiter that read and extended its grant, then died, is a dead holder and
/// blocks the name for its lease — the measure above would see a hand-off that did so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_a_dead_holder_blocks_for_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let gap = trial(&url, &url, Kind::Exclusive, None, 0).await;
    println!("dead holder (control): {gap:?}");
    assert!(
        gap > BOUND,
        "the control's dead holder blocked only {gap:?}"
    );
}
