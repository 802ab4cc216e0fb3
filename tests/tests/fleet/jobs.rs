//! Scheduled jobs in one process and with a killed instance: a skip is a value naming the
//! holder, `hold_at_least` keeps the name after the body (also after a failure) with an
//! owner-checked TTL, `hold_at_most` ends a dead instance's hold by itself.

use std::time::Duration;

use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::locks::{
    builder, client, exists, keys_left, lock_key, pttl, wait_until, GENEROUS,
};
use distlock_tests::RedisServer;
use lock_core::job::JobOutcome;
use lock_core::LockError;
use tokio::time::Instant;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");

/// Skipping names the holder; the body did not run.
#[tokio::test]
async fn a_busy_name_is_skipped_with_its_holder() {
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .service_name("reports")
        .build()
        .unwrap();
    let held = locks.lock("nightly").await.unwrap();
    let mut ran = false;
    let fire = locks
        .job("nightly")
        .run(async { ran = true })
        .await
        .unwrap();
    let JobOutcome::Skipped(skip) = fire else {
        panic!("ran while held: {fire:?}");
    };
    assert!(!ran);
    assert_eq!(skip.name().as_bytes(), b"nightly");
    assert_eq!(skip.holder().map(|h| h.service()), Some("reports"));
    assert!(skip.remaining_ttl().is_some());
    held.release().await.unwrap();
    let fire = locks.job("nightly").run(async { 7 }).await.unwrap();
    assert_eq!(fire, JobOutcome::Ran(7));
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert!(
        keys_left(&mut conn).await.is_empty(),
        "a job without hold_at_least leaves nothing"
    );
}

/// The name stays held until start + hold_at_least after the body ended early, and after it
/// failed; then it is free with nothing left behind.
#[tokio::test]
async fn hold_at_least_outlives_the_body_even_when_it_fails() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let least = Duration::from_secs(2);
    for fails in [false, true] {
        let started = Instant::now();
        let fire = locks
            .job("sweep")
            .hold_at_least(least)
            .hold_at_most(Duration::from_secs(30))
            .run(async {
                if fails {
                    Err("boom")
                } else {
                    Ok(())
                }
            })
            .await
            .unwrap();
        assert_eq!(
            fire,
            JobOutcome::Ran(if fails { Err("boom") } else { Ok(()) })
        );
        // Held, with what is left of the minimum as its TTL (not the 30 s lease).
        let ttl = pttl(&mut conn, &lock_key("sweep")).await;
        assert!(ttl > 0 && ttl <= 2_000, "PTTL {ttl}");
        let again = locks.job("sweep").run(async {}).await.unwrap();
        if started.elapsed() < least {
            assert!(again.is_skipped(), "ran within the minimum hold");
        }
        // Free by itself at start + minimum: a waiting fire then runs.
        let waited = locks
            .job("sweep")
            .wait(GENEROUS)
            .run(async { Instant::now() })
            .await
            .unwrap()
            .ran()
            .expect("ran once the minimum was over");
        assert!(waited >= started + least - Duration::from_millis(5));
    }
    assert!(keys_left(&mut conn).await.is_empty());
}

/// Cancelled in the middle of its body (the future dropped), a job with hold_at_least
/// lingers all the same: the watchdog's lease gives way to what is left of the minimum.
#[tokio::test]
async fn a_cancelled_job_lingers_too() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (running, is_running) = tokio::sync::oneshot::channel();
    let fire = locks
        .job("cancelled")
        .hold_at_least(Duration::from_secs(2))
        .run(async move {
            running.send(()).unwrap();
            std::future::pending::<()>().await;
        });
    let fire = tokio::spawn(fire);
    is_running.await.unwrap();
    fire.abort();
    assert!(fire.await.unwrap_err().is_cancelled());
    wait_until("the lock lingers for what is left of 2 s", GENEROUS, || {
        let mut conn = conn.clone();
        async move { (1..=2_000).contains(&pttl(&mut conn, &lock_key("cancelled")).await) }
    })
    .await;
    assert!(locks
        .job("cancelled")
        .run(async {})
        .await
        .unwrap()
        .is_skipped());
    crate::every_key_expires(&server, Some(2_000)).await;
}

/// A body that outlives hold_at_most has lost the name (and is told so); hold_at_least
/// above hold_at_most is refused before anything is taken.
#[tokio::test]
async fn hold_at_most_is_a_lease_without_watchdog() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let outcome = locks
        .job("slow")
        .hold_at_most(Duration::from_millis(300))
        .run(tokio::time::sleep(GENEROUS))
        .await;
    assert!(
        matches!(outcome, Err(LockError::Lost { .. })),
        "{outcome:?}"
    );
    let refused = locks
        .job("slow")
        .hold_at_least(Duration::from_secs(2))
        .hold_at_most(Duration::from_secs(1))
        .run(async {})
        .await;
    let error = refused.unwrap_err();
    assert!(
        matches!(error, LockError::InvalidRequest { .. }) && error.to_string().contains("slow"),
        "{error}"
    );
}

/// An instance SIGKILLed in the middle of a fire: the next fire after its hold_at_most runs
/// elsewhere — not before, and within a second after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_fire_runs_elsewhere_after_hold_at_most() {
    let server = RedisServer::start();
    let most = Duration::from_millis(1500);
    let args = [
        "hang",
        &server.url(),
        "-",
        "outbox",
        &most.as_millis().to_string(),
    ]
    .map(String::from);
    let mut instance = HolderProcess::spawn(FLEET, &args);
    // Taken no later than now: its hold ends at most `most` from here.
    let before = Instant::now();
    instance.expect("RUNNING", GENEROUS).await;
    let running = Instant::now();
    instance.kill().await;
    let locks = client(&server.url());
    let mut skipped = 0;
    let ran_at = loop {
        // Fires every 50 ms, as a tight schedule would: bounded in count.
        assert!(skipped < 400, "still skipped after {skipped} fires");
        match locks.job("outbox").run(async {}).await.unwrap() {
            JobOutcome::Ran(()) => break Instant::now(),
            JobOutcome::Skipped(_) => skipped += 1,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!(
        "fleet jobs: after SIGKILL, the next fire ran {:?} after the dead fire began \
         (hold_at_most {most:?}), {skipped} fires skipped before",
        ran_at - running
    );
    assert!(skipped > 0, "the dead instance's hold did not hold");
    // Taken between `before` and `running`: it ends between those plus hold_at_most.
    assert!(ran_at + Duration::from_millis(20) >= before + most);
    assert!(ran_at <= running + most + Duration::from_secs(1));
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert!(!exists(&mut conn, &lock_key("outbox")).await);
}
