//! Fault suite, Redlock over 5 independent masters: a minority down or slow leaves exclusion
//! intact; a majority down fails within its bound and leaves no partial grant behind.
//! (`redlock.rs` has the 3-node basics; these are the counted versions.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock_tests::fault::Summary;
use distlock_tests::locks::{lock_key, wait_until, OverlapDetector, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use lock_core::LockClient;
use redis::AsyncCommands;
use tokio::time::Instant;

const NODES: usize = 5;
const ACQUISITIONS: usize = 2_000;
const CLIENTS: usize = 4;
const TASKS_PER_CLIENT: usize = 4;
const NAMES: usize = 8;
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// The lease sets each node's call bound (a hundredth of it, at least 50 ms): a dead node
/// costs that much on every acquisition and release, so keep it short.
const LEASE: Duration = Duration::from_secs(5);

fn redlock(urls: &[String]) -> LockClient {
    LockClient::redlock(urls.iter().cloned())
        .lease(LEASE)
        .command_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap()
}

/// Lock keys (not fence counters) on the running nodes.
async fn lock_keys(servers: &[RedisServer]) -> usize {
    let mut total = 0;
    for server in servers.iter().filter(|s| s.is_running()) {
        let keys: Vec<String> = server.conn().await.keys("*").await.unwrap();
        total += keys
            .iter()
            .filter(|k| !k.starts_with("distlock__fence"))
            .count();
    }
    total
}

/// 5 nodes, one killed and one behind a proxy adding 5 ms each way: 4 clients × 4 tasks
/// make 2,000 acquisitions over 8 names. No two holders of a name overlap, and each name's
/// tokens strictly increase in the order the holds were taken. An attempt that found no
/// quorum in time (a loaded machine) is retried and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_down_and_slow_keeps_exclusion_over_2000_acquisitions() {
    let mut servers: Vec<RedisServer> = (0..NODES).map(|_| RedisServer::start()).collect();
    let slow = TcpProxy::start(servers[3].addr());
    slow.set_latency(Duration::from_millis(5));
    servers[4].kill();
    let mut urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    urls[3] = slow.url();

    let detectors: Arc<Vec<OverlapDetector>> =
        Arc::new((0..NAMES).map(|_| OverlapDetector::default()).collect());
    let last_token = Arc::new(Mutex::new(vec![0u64; NAMES]));
    let token_regressions = Arc::new(Mutex::new(Vec::new()));
    let no_quorum = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let locks = redlock(&urls);
        for t in 0..TASKS_PER_CLIENT {
            let (locks, detectors) = (locks.clone(), Arc::clone(&detectors));
            let (last_token, regressions) =
                (Arc::clone(&last_token), Arc::clone(&token_regressions));
            let no_quorum = Arc::clone(&no_quorum);
            let task = c * TASKS_PER_CLIENT + t;
            tasks.push(tokio::spawn(async move {
                for round in 0..ACQUISITIONS / (CLIENTS * TASKS_PER_CLIENT) {
                    let n = (task + round) % NAMES;
                    let give_up = Instant::now() + Duration::from_secs(60);
                    let guard = loop {
                        match locks
                            .lock(format!("redlock_{n}"))
                            .wait(Duration::from_secs(60))
                            .await
                        {
                            Ok(guard) => break guard,
                            // No quorum in time (a loaded machine), or refused at once while
                            // the client saw no node answer for a second: liveness, counted,
                            // tried again shortly (the client probes once a second).
                            Err(e) if e.is_unavailable() && Instant::now() < give_up => {
                                no_quorum.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            Err(e) => panic!("task {task} round {round}: {e}"),
                        }
                    };
                    detectors[n].enter();
                    {
                        let mut last = last_token.lock().unwrap();
                        if guard.fencing_token() <= last[n] {
                            regressions
                                .lock()
                                .unwrap()
                                .push((n, last[n], guard.fencing_token()));
                        }
                        last[n] = last[n].max(guard.fencing_token());
                    }
                    tokio::task::yield_now().await;
                    detectors[n].exit();
                    match guard.release().await {
                        Ok(()) => {}
                        // No majority answered in time (a loaded machine): the hold ends with
                        // its lease instead; exclusion is what this test checks. Counted.
                        Err(e) if e.is_unavailable() => {
                            no_quorum.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("task {task} round {round}: release: {e}"),
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let took = started.elapsed();
    let overlaps: usize = detectors.iter().map(OverlapDetector::overlaps).sum();
    let entries: usize = detectors.iter().map(OverlapDetector::entries).sum();
    let regressions = token_regressions.lock().unwrap().clone();
    println!(
        "faults::redlock: {entries} acquisitions with 1 of 5 nodes down and 1 slow in {took:?}: \
         {overlaps} overlaps, {} token regressions, {} acquisitions retried or releases left to the lease without a quorum",
        regressions.len(),
        no_quorum.load(Ordering::Relaxed)
    );
    assert_eq!(entries, ACQUISITIONS);
    assert_eq!(overlaps, 0);
    assert!(regressions.is_empty(), "{regressions:?}");
}

/// 5 nodes, three of them down (two killed, one hung behind a black-holed proxy): 10
/// acquisitions each fail within their 300 ms wait plus the command timeout (+1 s slack),
/// as unavailable or busy, and no lock key is left on the two live nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_down_fails_bounded_and_leaves_no_partial_keys() {
    let mut servers: Vec<RedisServer> = (0..NODES).map(|_| RedisServer::start()).collect();
    let hung = TcpProxy::start(servers[2].addr());
    hung.blackhole(true);
    servers[3].kill();
    servers[4].kill();
    let mut urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    urls[2] = hung.url();
    let locks = redlock(&urls);
    let wait = Duration::from_millis(300);
    let mut took = Vec::new();
    for i in 0..10 {
        let started = Instant::now();
        let err = locks
            .lock(format!("majority_{i}"))
            .wait(wait)
            .await
            .expect_err("granted without a majority");
        took.push(started.elapsed());
        assert!(err.is_unavailable() || err.is_wait_timeout(), "{err}");
        assert!(
            started.elapsed() < wait + COMMAND_TIMEOUT + Duration::from_secs(1),
            "attempt {i}: {:?}",
            started.elapsed()
        );
    }
    let summary = Summary::of(&took).unwrap();
    println!("faults::redlock: 3 of 5 nodes down, failures after {summary}");
    // A minority grant is undone at once, but maybe in the background: wait for it.
    let servers = &servers;
    wait_until("no partial grant is left", GENEROUS, || async move {
        lock_keys(servers).await == 0
    })
    .await;
}

/// Loads the library on `server`, or (`loaded` false) takes it away: the next call there
/// meets it missing, loads it and is sent again.
async fn set_library(server: &RedisServer, loaded: bool) {
    let mut conn = server.conn().await;
    let mut cmd = redis::cmd("FUNCTION");
    if loaded {
        cmd.arg("LOAD")
            .arg("REPLACE")
            .arg(lock_core::ops::FUNCTIONS_SOURCE);
    } else {
        cmd.arg("FLUSH");
    }
    cmd.query_async::<redis::Value>(&mut conn).await.unwrap();
}

/// A node whose library is missing (fresh, restarted empty, flushed) loads it at its first
/// call and sends the call again, behind what was sent meanwhile. An acquisition decided by
/// the other two nodes goes on there in the background, and its owner's release can reach
/// that node first: the retried grant then held the node for the whole lease (about half
/// the trials before the fix). A grant that answers after its hold ended is now released
/// there. Eight trials, each with the library taken away first; each client's
/// shutdown waits for its background calls, the late grant's included. Control: a hold that
/// is kept shows on the slow node, so the late grant does land there and the check sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_retried_after_its_release_is_undone() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    set_library(&servers[0], true).await;
    set_library(&servers[1], true).await;
    let slow = TcpProxy::start(servers[2].addr());
    slow.set_latency(Duration::from_millis(150));
    let urls = vec![servers[0].url(), servers[1].url(), slow.url()];
    let client = || {
        LockClient::redlock(urls.clone())
            .lease(Duration::from_secs(100))
            .command_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    let mut on_slow = servers[2].conn().await;
    for trial in 0..8 {
        set_library(&servers[2], false).await;
        let locks = client();
        let name = format!("first_load_{trial}");
        locks
            .lock(name.as_str())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        locks.shutdown().await.unwrap();
        let left: bool = on_slow.exists(lock_key(&name)).await.unwrap();
        assert!(!left, "trial {trial}: the slow node still holds {name}");
    }

    // Control: kept, the hold reaches the slow node after its first load.
    set_library(&servers[2], false).await;
    let locks = client();
    let kept = locks.lock("first_load_kept").await.unwrap();
    wait_until("the slow node has the kept hold", GENEROUS, || {
        let mut conn = on_slow.clone();
        async move { conn.exists(lock_key("first_load_kept")).await.unwrap() }
    })
    .await;
    kept.release().await.unwrap();
}
