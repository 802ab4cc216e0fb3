//! Multi-locks: all-or-nothing, no deadlock whatever order callers give, one token per name,
//! re-entry with single locks of the same scope.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{
    client, exists, function_calls, lock_key, reset_stats, OverlapDetector,
};
use distlock_tests::RedisServer;
use lock_core::{scope, LockError};
use tokio::time::Instant;

/// Two sets of tasks on two clients lock {a, b} and {b, a} for a bounded time (10 s, and
/// at most 2,000 rounds each): every task finishes (no deadlock) and neither name is ever
/// held twice at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opposite_orders_neither_deadlock_nor_overlap() {
    let server = RedisServer::start();
    let (a, b) = (
        Arc::new(OverlapDetector::default()),
        Arc::new(OverlapDetector::default()),
    );
    let until = Instant::now() + Duration::from_secs(10);
    let mut tasks = Vec::new();
    for (i, names) in [["a", "b"], ["b", "a"]]
        .into_iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        let locks = client(&server.url());
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        tasks.push(tokio::spawn(async move {
            let mut rounds = 0;
            while Instant::now() < until && rounds < 2_000 {
                let wait = Duration::from_secs(30);
                let both = locks.lock_all(names).wait(wait).await.expect("both names");
                a.enter();
                b.enter();
                tokio::task::yield_now().await;
                b.exit();
                a.exit();
                both.release().await.expect("release");
                rounds += 1;
            }
            (i, rounds)
        }));
    }
    let mut total = 0;
    for task in tasks {
        // A deadlock would hang here: bounded well past the 10 s of work.
        let (i, rounds) = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("no deadlock")
            .expect("task");
        assert!(rounds > 0, "task {i} never got both names");
        total += rounds;
    }
    assert_eq!((a.overlaps(), b.overlaps()), (0, 0));
    assert_eq!(a.entries(), total);
    let mut conn = server.conn().await;
    assert!(!exists(&mut conn, &lock_key("a")).await);
    assert!(!exists(&mut conn, &lock_key("b")).await);
}

/// A name held elsewhere fails the whole acquisition, names it, and leaves the names taken
/// before it released (the error is returned after that release).
#[tokio::test]
async fn partial_failure_leaves_nothing_held() {
    let server = RedisServer::start();
    let (locks, other) = (client(&server.url()), client(&server.url()));
    let c = other.lock("c").await.expect("c");
    let err = locks
        .lock_all(["b", "c", "a"])
        .wait(Duration::from_millis(300))
        .await
        .expect_err("c is held");
    assert!(
        matches!(&err, LockError::WaitTimeout { name, .. } if name.as_bytes() == b"c"),
        "{err}"
    );
    let mut conn = server.conn().await;
    assert!(!exists(&mut conn, &lock_key("a")).await);
    assert!(!exists(&mut conn, &lock_key("b")).await);
    assert!(locks
        .lock_all(["a", "b", "c"])
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(!exists(&mut conn, &lock_key("a")).await);
    c.release().await.unwrap();
    let all = locks.lock_all(["a", "b", "c"]).try_acquire().await.unwrap();
    all.expect("free now").release().await.unwrap();
}

/// A multi-lock and single locks of its names exclude each other; the guard has one
/// fencing token per name, each that name's own; a name given twice is taken once.
#[tokio::test]
async fn single_locks_are_excluded_and_tokens_are_per_name() {
    let server = RedisServer::start();
    let (locks, other) = (client(&server.url()), client(&server.url()));
    let both = locks
        .lock_all(["acct_4", "acct_17", "acct_4"])
        .await
        .expect("both");
    assert_eq!(both.guards().len(), 2);
    for name in ["acct_4", "acct_17"] {
        assert!(other.lock(name).try_acquire().await.unwrap().is_none());
        let token = both.fencing_token(name).expect("a name of the lock");
        let guard = both
            .guards()
            .iter()
            .find(|g| g.name().as_bytes() == name.as_bytes());
        assert_eq!(guard.unwrap().fencing_token(), token);
    }
    assert_eq!(both.fencing_token("acct_5"), None);
    assert!(both.is_held());
    both.release().await.unwrap();
    let single = other.lock("acct_17").await.unwrap();
    assert!(locks
        .lock_all(["acct_4", "acct_17"])
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    single.release().await.unwrap();
}

/// In a scope that holds one of the names, the multi-lock re-enters it (same token) and
/// takes the other; the scope's own hold outlives the multi-lock's release.
#[tokio::test]
async fn a_scope_reenters_its_single_lock() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    scope(async {
        let single = locks.lock("x").await.expect("x");
        let both = locks.lock_all(["y", "x"]).await.expect("re-enters x");
        assert_eq!(both.fencing_token("x"), Some(single.fencing_token()));
        both.release().await.unwrap();
        assert!(single.is_held());
        let mut conn = server.conn().await;
        assert!(exists(&mut conn, &lock_key("x")).await);
        assert!(!exists(&mut conn, &lock_key("y")).await);
        single.release().await.unwrap();
    })
    .await;
}

/// `run` holds every name around the work, shows the first given name as the current lock,
/// and releases them all; `lost()` fires when any of them is gone.
#[tokio::test]
async fn run_holds_all_and_lost_fires_for_any() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let current = locks
        .lock_all(["q", "p"])
        .run(async {
            lock_core::current_lock()
                .expect("inside run")
                .name()
                .clone()
        })
        .await
        .unwrap();
    assert_eq!(current.as_bytes(), b"q");
    let mut conn = server.conn().await;
    assert!(!exists(&mut conn, &lock_key("p")).await);
    let both = locks.lock_all(["p", "q"]).await.unwrap();
    let lost = both.lost();
    let () = redis::AsyncCommands::del(&mut conn, lock_key("q"))
        .await
        .unwrap();
    // The watchdog's next renewal (lease / 3) finds q gone.
    tokio::time::timeout(Duration::from_secs(30), lost)
        .await
        .expect("lost within a lease");
    assert!(!both.is_held());
    assert!(matches!(both.lost_error(), LockError::Lost { name, .. } if name.as_bytes() == b"q"));
}

/// Names all free with nobody queued are taken in one script call, and given back in one
/// round trip (the releases in flight together); every name still has its own hold.
#[tokio::test]
async fn uncontended_names_are_taken_in_one_call() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let mut conn = server.conn().await;
    // Loads the library, so that the counted round makes no load.
    let warm = locks.lock_all(["m1", "m2", "m3"]).await.unwrap();
    warm.release().await.unwrap();
    reset_stats(&mut conn).await;
    let all = locks.lock_all(["m3", "m1", "m2"]).await.unwrap();
    let (calls, stats) = function_calls(&mut conn).await;
    assert_eq!(calls, Some(1), "{stats}");
    assert_eq!(all.guards().len(), 3);
    for guard in all.guards() {
        assert!(exists(&mut conn, &lock_key(&guard.name().to_string())).await);
    }
    all.release().await.unwrap();
    for name in ["m1", "m2", "m3"] {
        assert!(!exists(&mut conn, &lock_key(name)).await);
    }
}
