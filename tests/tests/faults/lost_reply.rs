//! Fault suite, lost reply: the acquire script ran in Redis but its answer never reached
//! the client. The lock must not stay held until its lease ends with nobody knowing: either
//! the client reports it held, or it is released.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::{run_trials, Summary};
use distlock_tests::locks::{builder, exists, lock_key, wait_gone, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use tokio::time::Instant;

const TRIALS: usize = 20;
const CONCURRENCY: usize = 4;
/// "Released" must come well before the 30 s default lease
/// ([`lock_core::LockClientBuilder::DEFAULT_LEASE`]) would free the lock.
const RELEASED_WITHIN: Duration = Duration::from_secs(3);

enum Outcome {
    /// The acquisition returned a guard (it retried and saw its hold).
    Reported,
    /// The acquisition failed and the lock was gone this long after the failure.
    Released(Duration),
}

/// 20 trials: a client behind a proxy (warmed up: connected, scripts loaded) asks for a free
/// lock with the default 30 s lease; the proxy drops the reply to the acquire script and
/// cuts the connection (each trial checks that it did: [`fault_fired`]). Either the client
/// returns a guard for a lock that Redis has, or it fails and the lock is deleted within
/// 3 s; in both cases another client then gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_acquire_reply_is_released_or_reported() {
    let server = Arc::new(RedisServer::start());
    let outcomes = run_trials(TRIALS, CONCURRENCY, |i| trial(i, Arc::clone(&server))).await;
    let released: Vec<Duration> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Released(after) => Some(*after),
            Outcome::Reported => None,
        })
        .collect();
    let reported = outcomes.len() - released.len();
    let gone = Summary::of(&released).map_or_else(|| "-".to_owned(), |s| s.to_string());
    println!(
        "faults::lost_reply: {TRIALS} lost acquire replies: reported held {reported}, failed and \
         released {} (lock gone after the error: {gone})",
        released.len()
    );
}

/// The control: a proxy that drops nothing (its fault not armed, as if it had stopped
/// working) fails the check each trial makes, so a trial whose fault did not fire fails.
#[tokio::test]
async fn the_check_fails_when_the_proxy_drops_no_reply() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    let locks = builder(&proxy.url()).build().unwrap();
    let guard = locks.lock("lost_reply_control").await.unwrap();
    assert!(!fault_fired(&proxy), "nothing was dropped");
    guard.release().await.unwrap();
}

/// True when the proxy dropped exactly one reply: the fault under test fired.
fn fault_fired(proxy: &TcpProxy) -> bool {
    proxy.dropped_replies() == 1
}

async fn trial(i: usize, server: Arc<RedisServer>) -> Outcome {
    let proxy = TcpProxy::start(server.addr());
    let locks = builder(&proxy.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // Warm up: connect and load the acquire and release scripts.
    let warm = format!("warm_{i}");
    locks.lock(warm).await.unwrap().release().await.unwrap();
    let name = format!("lost_reply_{i}");
    proxy.drop_next_reply();
    let result = locks.lock(name.as_str()).wait(GENEROUS).await;
    let failed_at = Instant::now();
    assert!(
        fault_fired(&proxy),
        "trial {i}: the proxy dropped {} replies, not the acquisition's one",
        proxy.dropped_replies()
    );
    let mut conn = server.conn().await;
    let outcome = match result {
        Ok(guard) => {
            assert!(guard.is_held(), "trial {i}");
            assert!(exists(&mut conn, &lock_key(&name)).await, "trial {i}");
            guard.release().await.unwrap();
            Outcome::Reported
        }
        Err(e) => {
            assert!(e.is_unavailable(), "trial {i}: {e}");
            wait_gone(&mut conn, &lock_key(&name), RELEASED_WITHIN).await;
            Outcome::Released(failed_at.elapsed())
        }
    };
    let other = builder(&server.url()).build().unwrap();
    other
        .lock(name.as_str())
        .try_acquire()
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("trial {i}: still held after the lost reply"))
        .release()
        .await
        .unwrap();
    outcome
}
