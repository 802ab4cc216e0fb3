//! Fault suite, holder crash: a holder process SIGKILLed while its watchdog renews the lock
//! blocks a waiter only until the last renewed lease ends.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::fault::{run_trials, wait_renewed, Summary};
use distlock_tests::locks::{builder, lock_key, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
const LEASE: Duration = Duration::from_millis(500);
/// The bound the issue sets on top of the lease: wake-up, round trips, a loaded machine.
const SLACK: Duration = Duration::from_millis(250);
const TRIALS: usize = 20;
/// Trials at once (each on its own name): keeps the suite short on 2 cores.
const CONCURRENCY: usize = 4;

/// 20 trials: a child holds `crash_<i>` (watchdog, 500 ms lease) and has renewed it once; a
/// waiter in this process is queued; the child is SIGKILLed. The waiter must get the lock
/// within lease + 250 ms of the kill, with a higher fencing token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_is_replaced_within_lease_plus_250ms() {
    let (server, store) = (RedisServer::start(), RedisServer::start());
    let urls = Arc::new((server.url(), store.url()));
    let waits = run_trials(TRIALS, CONCURRENCY, |i| trial(i, Arc::clone(&urls))).await;
    let summary = Summary::of(&waits).expect("trials ran");
    println!("faults::holder_crash: waiter acquired after SIGKILL of the holder: {summary}");
    for (i, waited) in waits.iter().enumerate() {
        assert!(
            *waited <= LEASE + SLACK,
            "trial {i}: the waiter got the lock {waited:?} after the kill ({summary})"
        );
    }
}

async fn trial(i: usize, urls: Arc<(String, String)>) -> Duration {
    let (url, store_url) = &*urls;
    let name = format!("crash_{i}");
    let lease_ms = LEASE.as_millis().to_string();
    let args = ["hold", url, store_url, &name, &lease_ms].map(String::from);
    let mut holder = HolderProcess::spawn(HOLDER, &args);
    let acquired = holder.expect("ACQUIRED", GENEROUS).await;
    let holder_token: u64 = fields(&acquired)["token"].parse().unwrap();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    wait_renewed(&mut conn, &lock_key(&name), GENEROUS).await;

    let waiter = builder(url).lease(LEASE).build().unwrap();
    let waiting = tokio::spawn({
        let (waiter, name) = (waiter.clone(), name.clone());
        async move {
            let guard = waiter.lock(name).wait(GENEROUS).await;
            (guard, Instant::now())
        }
    });
    // Queued and subscribed: from now on only the holder's lease keeps the waiter out.
    wait_until("the waiter is subscribed", GENEROUS, || async {
        waiter.waited_channels() == 1
    })
    .await;
    assert!(!waiting.is_finished(), "trial {i}: acquired while held");
    let killed = Instant::now();
    holder.kill().await;
    let (guard, acquired_at) = waiting.await.unwrap();
    let guard = guard.unwrap_or_else(|e| panic!("trial {i}: waiter failed: {e}"));
    assert!(
        guard.fencing_token() > holder_token,
        "trial {i}: token {} after {holder_token}",
        guard.fencing_token()
    );
    guard.release().await.unwrap();
    acquired_at - killed
}
