//! Fault suite, Redis faults under a held lock: a restart that loses the data, and a freeze
//! longer than the lease. (`lost.rs` has one run of each; these repeat them with the
//! figures the Safety page quotes.)

use std::time::Duration;

use distlock_tests::fault::store::{FencedStore, Stale};
use distlock_tests::fault::{run_trials, wait_renewed, Summary};
use distlock_tests::locks::{builder, lock_key, wait_gone, GENEROUS};
use distlock_tests::RedisServer;
use redis::aio::MultiplexedConnection;
use tokio::task::block_in_place;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_millis(600);
/// Scheduling slack on top of the lease for "fires at the local deadline".
const SLACK: Duration = Duration::from_millis(250);
const TRIALS: usize = 10;
/// Trials at once, each with its own Redis.
const CONCURRENCY: usize = 5;

async fn conn(server: &RedisServer) -> MultiplexedConnection {
    server.conn().await
}

/// What a restart trial saw.
struct Restart {
    lost_after: Duration,
    /// B got the lock before A's `lost()` fired: both believed they held it.
    both_believed: bool,
}

/// 10 trials: A holds a lock (watchdog, 600 ms lease, its first to third hold); Redis is
/// killed and restarted empty (no persistence); B asks for the lock at once. A's `lost()`
/// fires within lease + 250 ms (at its next renewal, else at the local deadline) and A's
/// watchdog never takes the lock back. The fence counter is lost with the data, but a new
/// counter starts at the Redis clock: B's token is above A's, so the fenced store takes B's
/// writes and refuses A's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_persistence_fires_lost_and_never_reacquires() {
    let store = RedisServer::start();
    let store_url = store.url();
    let trials = run_trials(TRIALS, CONCURRENCY, |i| {
        let store_url = store_url.clone();
        async move { restart_trial(i, &store_url).await }
    })
    .await;
    let lost = Summary::of(&trials.iter().map(|t| t.lost_after).collect::<Vec<_>>()).unwrap();
    let both = trials.iter().filter(|t| t.both_believed).count();
    println!(
        "faults::redis_server restart: lost() after the restart: {lost}; B acquired before A was told \
         in {both}/{TRIALS}; B's token above A's in {TRIALS}/{TRIALS}"
    );
}

async fn restart_trial(i: usize, store_url: &str) -> Restart {
    let mut server = RedisServer::start();
    let (url, name) = (server.url(), format!("restart_{i}"));
    let key = lock_key(&name);
    let a = builder(&url).lease(LEASE).build().unwrap();
    // Earlier holds in some trials: A's is the counter's first, second or third token.
    for _ in 0..i % 3 {
        a.lock(name.as_str())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let guard_a = a.lock(name.as_str()).await.unwrap();
    let token_a = guard_a.fencing_token();
    let mut store = FencedStore::connect(store_url, &name).await.unwrap();
    assert_eq!(store.read(token_a).await.unwrap(), Ok(0));
    wait_renewed(&mut conn(&server).await, &key, GENEROUS).await;

    block_in_place(|| server.restart());
    let restarted = Instant::now();
    let b = builder(&url).lease(LEASE).build().unwrap();
    let guard_b = b
        .lock(name.as_str())
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("trial {i}: B: {e}"))
        .unwrap_or_else(|| panic!("trial {i}: the lock survived a restart without persistence"));
    let both_believed = guard_a.is_held();
    tokio::time::timeout(LEASE + SLACK, guard_a.lost())
        .await
        .unwrap_or_else(|_| panic!("trial {i}: lost() did not fire within lease + {SLACK:?}"));
    let lost_after = restarted.elapsed();
    assert!(!guard_a.is_held());
    let err = guard_a.extend(LEASE).await.unwrap_err();
    assert!(err.is_lost(), "trial {i}: {err}");

    // No silent re-acquire: over two more watchdog ticks, A's client never takes the key.
    tokio::time::sleep(LEASE * 2 / 3).await;
    let mut conn = conn(&server).await;
    let owners: Vec<String> = redis::cmd("HKEYS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        owners.iter().all(|o| !o.starts_with(a.id())),
        "trial {i}: A's client holds the lock again: {owners:?}"
    );
    assert!(guard_b.is_held(), "trial {i}: B lost the lock");

    // The fence counter went with the data and started again from the Redis clock: B's
    // token is above A's, so the store takes B and refuses A from now on.
    let token_b = guard_b.fencing_token();
    assert!(
        token_b > token_a,
        "trial {i}: B's token {token_b} <= A's {token_a}"
    );
    assert_eq!(store.read(token_b).await.unwrap(), Ok(0), "trial {i}");
    assert_eq!(
        store.read(token_a).await.unwrap(),
        Err(Stale { highest: token_b }),
        "trial {i}"
    );
    guard_b.release().await.unwrap();
    drop(guard_a);
    Restart {
        lost_after,
        both_believed,
    }
}

/// 10 trials: A holds a lock (watchdog, 600 ms lease, 5 s command timeout so no error
/// answers either); Redis is frozen (SIGSTOP) for 1.5 leases. `lost()` fires within the
/// lease (+250 ms scheduling slack) of the freeze, from the local clock alone, naming the
/// lease running out; after the thaw the lock is gone from Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_redis_fires_lost_at_the_local_deadline_without_a_reply() {
    let fired = run_trials(TRIALS, CONCURRENCY, freeze_trial).await;
    let summary = Summary::of(&fired).unwrap();
    println!(
        "faults::redis_server freeze: lost() after SIGSTOP of Redis (lease {LEASE:?}): {summary}"
    );
}

async fn freeze_trial(i: usize) -> Duration {
    let server = RedisServer::start();
    let name = format!("frozen_{i}");
    let key = lock_key(&name);
    let a = builder(&server.url())
        .lease(LEASE)
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = a.lock(name.as_str()).await.unwrap();
    let mut conn = conn(&server).await;
    wait_renewed(&mut conn, &key, GENEROUS).await;

    block_in_place(|| server.pause());
    let paused = Instant::now();
    let fired = tokio::time::timeout(LEASE + SLACK, guard.lost()).await;
    let after = paused.elapsed();
    // The fault lasts 1.5 leases whatever happened, so Redis' own expiry has passed too.
    tokio::time::sleep_until(paused + LEASE * 3 / 2).await;
    block_in_place(|| server.resume());
    assert!(
        fired.is_ok(),
        "trial {i}: lost() did not fire within lease + {SLACK:?} of the freeze"
    );
    assert!(!guard.is_held(), "trial {i}");
    let err = guard.extend(LEASE).await.unwrap_err();
    assert!(
        err.is_lost() && err.to_string().contains("ran out"),
        "trial {i}: {err}"
    );
    wait_gone(&mut conn, &key, GENEROUS).await;
    drop(guard);
    after
}
