//! Fault suite, holder pause: a holder process frozen (SIGSTOP) for longer than its lease
//! loses the lock to another holder, learns it when it runs again, cannot delete the new
//! holder's lock, and its write to a fenced store is refused.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::fault::store::FencedStore;
use distlock_tests::fault::{run_trials, wait_renewed, Summary};
use distlock_tests::locks::{builder, exists, lock_key, GENEROUS};
use distlock_tests::RedisServer;
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
const LEASE: Duration = Duration::from_secs(1);
const TRIALS: usize = 20;
const CONCURRENCY: usize = 4;

/// What one trial measured.
struct Trial {
    /// From SIGSTOP until the other holder got the lock.
    taken_after: Duration,
    /// `lost()` had already fired when the resumed holder looked (else it fired before the
    /// holder's next guarded step).
    lost_already: bool,
}

/// 20 trials: child A holds `paused_<i>` (watchdog, 1 s lease) and has read the fenced store
/// with its token; A is SIGSTOPped for 1.5 × lease; B (this process) takes the lock
/// meanwhile and writes the store with its token; A is SIGCONTed. Then A's `lost()` has
/// fired (or fires at once), `is_held()` is false, A's release deletes nothing (B's release
/// still succeeds), and A's fenced write is rejected. No exception in any trial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_is_fenced_off_after_resuming() {
    let (server, store) = (RedisServer::start(), RedisServer::start());
    let urls = Arc::new((server.url(), store.url()));
    let trials = run_trials(TRIALS, CONCURRENCY, |i| trial(i, Arc::clone(&urls))).await;
    let taken = Summary::of(&trials.iter().map(|t| t.taken_after).collect::<Vec<_>>()).unwrap();
    let already = trials.iter().filter(|t| t.lost_already).count();
    println!(
        "faults::holder_pause: {TRIALS} trials, 0 exceptions; B acquired after SIGSTOP: {taken}; \
         lost() already fired at resume in {already}/{TRIALS}, else before the next guarded step"
    );
}

async fn trial(i: usize, urls: Arc<(String, String)>) -> Trial {
    let (url, store_url) = &*urls;
    let name = format!("paused_{i}");
    let lease_ms = LEASE.as_millis().to_string();
    let args = ["hold", url, store_url, &name, &lease_ms].map(String::from);
    let mut a = HolderProcess::spawn(HOLDER, &args);
    let acquired = a.expect("ACQUIRED", GENEROUS).await;
    let token_a: u64 = fields(&acquired)["token"].parse().unwrap();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    wait_renewed(&mut conn, &lock_key(&name), GENEROUS).await;

    let locks_b = builder(url).lease(LEASE).build().unwrap();
    a.stop();
    let stopped = Instant::now();
    let taking = tokio::spawn({
        let (locks_b, name) = (locks_b.clone(), name.clone());
        async move { (locks_b.lock(name).wait(GENEROUS).await, Instant::now()) }
    });
    // The fault: A stays frozen for 1.5 leases.
    tokio::time::sleep_until(stopped + LEASE * 3 / 2).await;
    assert!(
        taking.is_finished(),
        "trial {i}: no other holder got the lock while A was frozen for 1.5 leases"
    );
    let (guard_b, taken_at) = taking.await.unwrap();
    let guard_b = guard_b.unwrap_or_else(|e| panic!("trial {i}: B failed: {e}"));
    let token_b = guard_b.fencing_token();
    assert!(
        token_b > token_a,
        "trial {i}: token {token_b} after {token_a}"
    );
    let mut store = FencedStore::connect(store_url, &name).await.unwrap();
    let value = store
        .read(token_b)
        .await
        .unwrap()
        .unwrap_or_else(|s| panic!("trial {i}: B's read refused: {s:?}"));
    assert_eq!(store.write(token_b, value + 1).await.unwrap(), Ok(()));

    a.cont();
    a.send("RESUMED").await;
    let line = a.expect("RESUMED", GENEROUS).await;
    let seen = fields(&line);
    assert_eq!(
        seen["held"], "0",
        "trial {i}: A still claims the lock: {line}"
    );
    assert_eq!(
        seen["lost_fired"], "1",
        "trial {i}: lost() did not fire: {line}"
    );
    assert_eq!(
        seen["release"], "not_held",
        "trial {i}: A's release: {line}"
    );
    assert_eq!(
        seen["write"], "rejected",
        "trial {i}: A's fenced write: {line}"
    );
    assert_eq!(seen["highest"], token_b.to_string(), "trial {i}: {line}");
    // A's release deleted nothing: B's lock is there and B's own release succeeds.
    assert!(guard_b.is_held(), "trial {i}: B lost the lock");
    assert!(exists(&mut conn, &lock_key(&name)).await, "trial {i}");
    guard_b
        .release()
        .await
        .unwrap_or_else(|e| panic!("trial {i}: B's release after A's: {e}"));
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.value, stats.write_log.clone(), stats.rejected_writes),
        (value + 1, vec![token_b], 1),
        "trial {i}"
    );
    let (status, _) = a.finish(GENEROUS).await;
    assert!(status.success(), "trial {i}: holder exited with {status}");
    Trial {
        taken_after: taken_at - stopped,
        lost_already: seen["lost_already"] == "1",
    }
}

/// A waiter frozen while queued is handed the lock (direct hand-off), the grant expires, and
/// another client takes the lock. When the waiter runs again it must not believe it holds
/// the lock: its acquisition fails, or returns a guard that `is_held()` already denies.
///
/// Regression: after the thaw the waiter's retry timer may fire first, find the lock busy,
/// and then read the stale grant message; lock-core used to trust it. A busy answer now
/// carries the fencing counter, and a grant whose token is not above it is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_waiter_does_not_trust_a_stale_grant() {
    let (server, store) = (RedisServer::start(), RedisServer::start());
    let mut conn = server.conn().await;
    let mut believed = Vec::new();
    for i in 0..5 {
        let name = format!("stale_grant_{i}");
        let key = lock_key(&name);
        let locks = builder(&server.url()).lease(LEASE).build().unwrap();
        let first = locks.lock(name.as_str()).await.unwrap();
        let lease_ms = LEASE.as_millis().to_string();
        let args = ["hold", &server.url(), &store.url(), &name, &lease_ms].map(String::from);
        let mut waiter = HolderProcess::spawn(HOLDER, &args);
        // Queued: the waiter's entry is in the lock's queue.
        let queue = format!("distlock__wait:{{{key}}}");
        distlock_tests::locks::wait_until("the waiter is queued", GENEROUS, || {
            let (mut conn, queue) = (conn.clone(), queue.clone());
            async move { distlock_tests::locks::queued(&mut conn, &queue).await == 1 }
        })
        .await;
        waiter.stop();
        first.release().await.unwrap(); // hands the lock to the frozen waiter
        distlock_tests::locks::wait_gone(&mut conn, &key, GENEROUS).await; // its grant expired
        let other = locks.lock(name.as_str()).await.unwrap();
        waiter.cont();
        // The window in which the thawed waiter reads its stale grant (a fault duration,
        // not a synchronisation): then the lock is released for real.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let other_token = other.fencing_token();
        other.release().await.unwrap();
        let line = waiter.expect("ACQUIRED", GENEROUS).await;
        let waiter_token: u64 = fields(&line)["token"].parse().unwrap();
        // A stale grant read before any retry comes with the lease it had (long over), so
        // the guard is born lost (held=0): allowed. Believing it (held=1) is the bug.
        if waiter_token <= other_token && fields(&line)["held"] == "1" {
            believed.push(format!(
                "trial {i}: waiter believed a stale token {waiter_token} (other had {other_token})"
            ));
        }
        drop(waiter);
    }
    assert!(believed.is_empty(), "{believed:#?}");
}
