//! The lost-lock signal: from Redis' answers and from the local clock.

use std::time::Duration;

use distlock_tests::locks::{builder, GENEROUS};
use distlock_tests::RedisServer;
use redis::AsyncCommands;

/// The key deleted externally → `lost()` fires within about one watchdog tick.
#[tokio::test]
async fn external_delete_fires_lost_within_a_tick() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_secs(3))
        .build()
        .unwrap();
    let guard = locks.lock("deleted").await.expect("acquire");
    let () = conn.del("distlock:deleted").await.unwrap();
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fired");
    // One tick is 1 s; allow scheduling slack on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!guard.is_held());
    let err = guard.extend(Duration::from_secs(1)).await.unwrap_err();
    assert!(err.is_lost(), "{err}");
}

/// Redis killed and restarted mid-hold (no persistence) → `lost()` fires, never a silent
/// re-acquire; the client reconnects and new locks work.
#[tokio::test]
async fn redis_restart_fires_lost_and_client_recovers() {
    let mut server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let guard = locks.lock("restarted").await.expect("acquire");
    server.restart();
    tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("lost() fired after the restart");
    let mut conn = server.conn().await;
    let exists: bool = conn.exists("distlock:restarted").await.unwrap();
    assert!(!exists, "the watchdog must not re-create a lost lock");
    drop(guard);
    let again = locks
        .lock("restarted")
        .wait(GENEROUS)
        .await
        .expect("new lock after reconnect");
    again.release().await.expect("release");
}

/// Redis frozen (SIGSTOP) longer than the lease → `lost()` fires at the local deadline,
/// with no answer from Redis at all.
#[tokio::test]
async fn frozen_redis_fires_lost_at_the_local_deadline() {
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let guard = locks.lock("frozen").await.expect("acquire");
    server.pause();
    let started = tokio::time::Instant::now();
    let fired = tokio::time::timeout(GENEROUS, guard.lost()).await;
    server.resume();
    fired.expect("lost() fired without Redis answering");
    assert!(
        started.elapsed() <= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// `run` with `OnLost::Abort` returns `Lost` when the hold was gone before the work ended
/// and only the release could tell (force-released between renewals), instead of `Ok` with
/// the loss only logged (found by distlock-verify's honesty checker); `OnLost::Continue`
/// still returns the output.
#[tokio::test]
async fn run_reports_a_loss_found_only_at_the_release() {
    let server = RedisServer::start();
    let locks = builder(&server.url()).build().unwrap();
    let operator = builder(&server.url()).build().unwrap();
    let work = async {
        assert!(operator.force_release("taken_away").await.unwrap());
        42
    };
    let result = locks.lock("taken_away").wait(GENEROUS).run(work).await;
    assert!(matches!(&result, Err(e) if e.is_lost()), "{result:?}");
    let work = async {
        assert!(operator.force_release("taken_away").await.unwrap());
        42
    };
    let on_lost = lock_core::OnLost::Continue;
    let result = locks.lock("taken_away").on_lost(on_lost).run(work).await;
    assert_eq!(result.unwrap(), 42);
}

/// `run` with `OnLost::Abort` still checks the hold at the release when the client last saw
/// Redis unreachable: Redis came back empty and the lock is another's, so the answer is
/// `Lost`, not `Ok` with the release skipped (found by distlock-verify's honesty checker in
/// a 20-minute run: a restart with its data gone, then a release 47 ms after Redis was back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_checks_the_hold_after_an_outage_the_client_saw() {
    let mut server = RedisServer::start();
    // A lease no renewal comes within: only the release can tell.
    let lease = Duration::from_secs(30);
    let locks = builder(&server.url())
        .lease(lease)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (started, mut started_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (finish, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn({
        let locks = locks.clone();
        async move {
            let work = async move {
                started.send(()).await.unwrap();
                finish_rx.await.unwrap();
                42
            };
            locks.lock("restarted").run(work).await
        }
    });
    started_rx.recv().await.expect("the work runs");
    // The holder's client sees the outage...
    tokio::task::block_in_place(|| server.kill());
    let err = locks.lock("probe").wait(Duration::ZERO).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(!locks.is_reachable());
    // ...Redis comes back with its data gone, and another client takes the lock.
    tokio::task::block_in_place(|| server.restart());
    let other = builder(&server.url()).build().unwrap();
    let taken = other.lock("restarted").wait(GENEROUS).await.unwrap();
    finish.send(()).unwrap();
    let result = run.await.unwrap();
    assert!(matches!(&result, Err(e) if e.is_lost()), "{result:?}");
    assert!(taken.is_held());
}
