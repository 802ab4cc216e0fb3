//! Redlock over independent masters: exclusion, quorum with a minority down, bounded failure
//! with a majority down, and loss when the quorum is gone.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{exists, lock_key, wait_until, OverlapDetector, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{LockClient, LockError};
use redis::AsyncCommands;
use tokio::time::Instant;

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

/// A Redlock client whose calls get 1 s per node: a node's bound is a hundredth of the lease
/// (at least 50 ms, at most the command timeout), so the lease is 100 s.
fn redlock(servers: &[RedisServer]) -> LockClient {
    LockClient::redlock(servers.iter().map(RedisServer::url))
        .lease(Duration::from_secs(100))
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// Runs `acquire` again while it fails as an outage, for up to [`GENEROUS`]: with a short
/// lease a node's bound is 50 ms, which a busy machine's first call (script load) can miss.
async fn retry_unavailable<T, F>(mut acquire: impl FnMut() -> F) -> Result<T, LockError>
where
    F: IntoFuture<Output = Result<T, LockError>>,
{
    let deadline = Instant::now() + GENEROUS;
    loop {
        match acquire().await {
            // Shortly: while no node answered for a second, the client refuses at once.
            Err(e) if e.is_unavailable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

async fn keys_everywhere(servers: &[RedisServer]) -> usize {
    keys_left(servers).await.len()
}

/// The keys left on the running nodes, but fence floors (they outlive holds on purpose), each
/// as `node: key (type, ms to live)`: what a failing clean-up check names.
async fn keys_left(servers: &[RedisServer]) -> Vec<String> {
    let mut left = Vec::new();
    for (i, server) in servers.iter().enumerate().filter(|(_, s)| s.is_running()) {
        let mut conn = server.conn().await;
        let keys: Vec<String> = conn.keys("*").await.unwrap();
        for key in keys.iter().filter(|k| !k.starts_with("distlock__fence")) {
            let kind: String = redis::cmd("TYPE")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap();
            let ttl: i64 = conn.pttl(key).await.unwrap();
            left.push(format!("node {i}: {key} ({kind}, {ttl} ms)"));
        }
    }
    left
}

/// 3 and 5 nodes: 3 clients × 4 tasks never overlap, tokens only grow, and nothing is left
/// once the last release is done (the nodes' first calls load the library, and a grant
/// retried after that load is undone if its hold ended meanwhile:
/// `faults::redlock::a_grant_retried_after_its_release_is_undone`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_on_three_and_five_nodes() {
    for n in [3, 5] {
        let nodes = servers(n);
        let detector = Arc::new(OverlapDetector::default());
        let last_token = Arc::new(tokio::sync::Mutex::new(0));
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let locks = redlock(&nodes);
            for _ in 0..4 {
                let (locks, detector, last_token) =
                    (locks.clone(), detector.clone(), last_token.clone());
                tasks.push(tokio::spawn(async move {
                    for _ in 0..25 {
                        let guard = locks
                            .lock("shared")
                            .wait(Duration::from_secs(60))
                            .await
                            .unwrap();
                        detector.enter();
                        let mut last = last_token.lock().await;
                        assert!(guard.fencing_token() > *last);
                        *last = guard.fencing_token();
                        drop(last);
                        detector.exit();
                        guard.release().await.unwrap();
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(detector.entries(), 300, "{n} nodes");
        assert_eq!(detector.overlaps(), 0, "{n} nodes");
        // A release returns at the first node that released; the others follow in the
        // background, so the last keys go shortly after.
        let deadline = Instant::now() + GENEROUS;
        loop {
            let left = keys_left(&nodes).await;
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{n} nodes: keys left {GENEROUS:?} after the last release: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A minority down: locks are still granted and released.
#[tokio::test]
async fn minority_down_still_locks() {
    let mut nodes = servers(5);
    nodes[0].kill();
    nodes[3].kill();
    let locks = redlock(&nodes);
    for i in 0..20 {
        let guard = locks
            .lock(format!("minority_{i}"))
            .await
            .expect("quorum of 3 of 5");
        assert!(guard.is_held());
        guard.release().await.expect("released on the majority");
    }
}

/// A hold still on a minority only is not released "Ok": another owner may have had the
/// majority meanwhile (found by distlock-verify: the release answered Ok at the first node
/// that had the hold, so a holder that had lost its majority was never told).
#[tokio::test]
async fn release_of_a_hold_left_on_a_minority_is_not_held() {
    let nodes = servers(3);
    let locks = redlock(&nodes);
    let guard = locks.lock("minority_left").await.unwrap();
    // The acquisition answers at a majority; the last node's call may still be on its way
    // (its first call loads the library): the hold is on all three before the fault.
    for node in &nodes {
        let conn = node.conn().await;
        wait_until("the hold reached every node", GENEROUS, || {
            let mut conn = conn.clone();
            async move { exists(&mut conn, &lock_key("minority_left")).await }
        })
        .await;
    }
    // The hold disappears from two of the three nodes (as a force release racing the
    // acquisition leaves it), and another client takes the majority.
    for node in &nodes[1..] {
        let mut conn = node.conn().await;
        let keys: Vec<String> = conn.keys("*minority_left*").await.unwrap();
        for key in keys.iter().filter(|k| !k.starts_with("distlock__fence")) {
            let _: () = conn.del(key).await.unwrap();
        }
    }
    let other = redlock(&nodes);
    let taken = retry_unavailable(|| other.lock("minority_left").wait(GENEROUS)).await;
    let taken = taken.expect("the majority is free");
    let released = guard.release().await;
    assert!(
        matches!(released, Err(lock_core::LockError::NotHeld { .. })),
        "a hold on 1 of 3 nodes released as {released:?}"
    );
    taken.release().await.unwrap();
}

/// A release that fewer than a majority answer, none of them holding it, does not know the
/// hold was lost: it answers the nodes' failure, not `NotHeld` (found by
/// `faults::redlock` on a busy machine: a slow majority and one answer from a node the
/// acquisition never reached made a release say the hold had been taken over). Control: the
/// same hold with the two nodes answering releases `Ok`.
#[tokio::test]
async fn release_that_too_few_nodes_answer_is_unknown_not_lost() {
    let nodes = servers(3);
    let locks = redlock(&nodes);
    for (name, paused) in [("few_answer", true), ("few_answer_control", false)] {
        let guard = locks.lock(name).await.unwrap();
        for node in &nodes {
            let conn = node.conn().await;
            wait_until("the hold reached every node", GENEROUS, || {
                let mut conn = conn.clone();
                async move { exists(&mut conn, &lock_key(name)).await }
            })
            .await;
        }
        // One node lost the hold (as one the acquisition never reached); the two that have
        // it answer nothing.
        let mut conn = nodes[0].conn().await;
        let _: () = conn.del(lock_key(name)).await.unwrap();
        if paused {
            nodes[1].pause();
            nodes[2].pause();
        }
        let released = guard.release().await;
        if paused {
            nodes[1].resume();
            nodes[2].resume();
            let error = released.expect_err("two of three nodes did not answer");
            assert!(
                error.is_unavailable(),
                "a release one node answered without the hold: {error:?}"
            );
        } else {
            released.expect("the two nodes that have the hold release it");
        }
    }
}

/// A majority down: a bounded, typed failure, and no partial keys left on the live node.
#[tokio::test]
async fn majority_down_fails_bounded_and_clean() {
    let mut nodes = servers(3);
    nodes[1].kill();
    nodes[2].kill();
    let locks = redlock(&nodes);
    let started = Instant::now();
    let err = locks
        .lock("majority")
        .wait(Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(err.is_unavailable() || err.is_wait_timeout(), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(500) + Duration::from_secs(2) + GENEROUS / 5,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        keys_everywhere(&nodes).await,
        0,
        "a partial grant was left on the live node"
    );
}

/// The quorum lost mid-hold → `lost()` fires; one node restarted empty → still held.
/// Multi-threaded: the restart blocks the test's thread, and the watchdog must keep renewing
/// the 1 s lease meanwhile (every 100 ms: a renewal that misses its 50 ms per node on a busy
/// machine is tried again well before the lease ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_when_the_quorum_is_gone() {
    let mut nodes = servers(3);
    let locks = LockClient::redlock(nodes.iter().map(RedisServer::url))
        .lease(Duration::from_secs(1))
        .watchdog_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let guard = retry_unavailable(|| locks.lock("quorum")).await.unwrap();
    nodes[0].restart();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        assert!(guard.is_held(), "two of three nodes still hold it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    nodes[1].kill();
    tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("lost() fired");
    assert!(!guard.is_held());
}

/// Operators see a Redlock lock as its quorum does: `inspect` and `list` read every node,
/// skip a dead minority, and do not call a key that only a minority has a held lock.
#[tokio::test]
async fn inspect_and_list_read_the_quorum() {
    let mut nodes = servers(3);
    nodes[0].kill();
    let locks = redlock(&nodes);
    let guard = locks.lock("seen").await.expect("quorum of 2 of 3");
    let state = locks
        .inspect("seen")
        .await
        .expect("inspect with a node down");
    assert!(state.is_held(), "{state:?}");
    assert_eq!(state.fencing_token(), guard.fencing_token());
    let listed = locks.list("").await.expect("list with a node down");
    let names: Vec<String> = listed.iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["seen"]);
    // A hold on one node of three is no lock.
    let mut conn = nodes[1].conn().await;
    let key = distlock_tests::locks::lock_key("ghost");
    let () = conn.hset(&key, "someone:1", 1).await.unwrap();
    let state = locks.inspect("ghost").await.unwrap();
    assert!(!state.is_held() && state.owner().is_none(), "{state:?}");
    guard.release().await.unwrap();
    assert!(!locks.inspect("seen").await.unwrap().is_held());
}

/// Redlock's fence floors last a lease: 50 names locked and released on 3 nodes leave no
/// key on any node once their lease (500 ms) is over, and a name's tokens still rise.
#[tokio::test]
async fn fence_floors_expire_with_the_lease() {
    let nodes = servers(3);
    let locks = redlock(&nodes);
    let lease = Duration::from_millis(500);
    let mut last = 0;
    for i in 0..50 {
        let name = format!("floor_{}", i % 5);
        let guard = retry_unavailable(|| locks.lock(name.as_str()).lease(lease))
            .await
            .unwrap();
        if i % 5 == 0 {
            assert!(guard.fencing_token() > last);
            last = guard.fencing_token();
        }
        guard.release().await.unwrap();
    }
    distlock_tests::locks::wait_until("every fence floor expired", lease + GENEROUS, || async {
        let mut total = 0;
        for node in &nodes {
            let mut conn = node.conn().await;
            let keys: Vec<String> = conn.keys("*").await.unwrap();
            total += keys.len();
        }
        total == 0
    })
    .await;
}

/// Multi-locks work under Redlock (each name by majority); read-write locks and semaphores
/// are refused with a typed error that says why.
#[tokio::test]
async fn multi_locks_work_and_shared_modes_are_refused() {
    let nodes = servers(3);
    let (locks, other) = (redlock(&nodes), redlock(&nodes));
    let both = locks.lock_all(["from", "to"]).await.unwrap();
    assert!(other.lock("to").try_acquire().await.unwrap().is_none());
    assert!(both.fencing_token("from").is_some());
    both.release().await.unwrap();
    assert_eq!(keys_everywhere(&nodes).await, 0);
    for request in [
        locks.read_lock("x"),
        locks.write_lock("x"),
        locks.semaphore("x", 2),
    ] {
        let err = request.await.expect_err("refused under Redlock");
        assert!(
            matches!(&err, lock_core::LockError::InvalidRequest { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("Redlock"), "{err}");
    }
}
