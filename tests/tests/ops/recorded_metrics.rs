//! Metrics (feature `metrics`), read through `metrics-util`'s debugging recorder: the values
//! a dashboard would show for acquisitions, waits, wake-ups, holds, renewals and losses.
//!
//! One recorder is installed for the whole test binary (`distlock_tests::metrics`); each
//! test uses its own lock family, so parallel tests never read each other's series.

use std::time::{Duration, Instant};

use distlock_tests::locks::{builder, client, lock_key, wait_until, GENEROUS};
use distlock_tests::metrics::{counter, description, gauge, histogram, install};
use distlock_tests::RedisServer;
use redis::aio::MultiplexedConnection;

/// Outcomes, waits, contention, the held gauge and hold times of one family.
#[tokio::test]
async fn acquisitions_are_counted_by_outcome_with_wait_and_hold_times() {
    install();
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()), client(&server.url()));
    let fam = "template=order_<id>";
    let before_acquire = Instant::now();
    let guard = a.lock("order_1").metrics_label("order_<id>").await.unwrap();
    let acquired_at = Instant::now();
    assert_eq!(gauge("distlock_held", &[fam]), 1.0);
    let busy = b
        .lock("order_1")
        .metrics_label("order_<id>")
        .wait(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(busy.is_wait_timeout());
    let acquired = ["outcome=acquired", fam];
    let timeout = ["outcome=timeout", fam];
    assert_eq!(counter("distlock_acquisitions_total", &acquired), 1);
    assert_eq!(counter("distlock_acquisitions_total", &timeout), 1);
    assert_eq!(counter("distlock_contended_total", &[fam]), 1);
    let waits = histogram("distlock_wait_seconds", &timeout);
    assert!(waits.len() == 1 && waits[0] >= 0.2, "{waits:?}");
    assert_eq!(histogram("distlock_wait_seconds", &acquired).len(), 1);
    let held_at_least = acquired_at.elapsed();
    guard.release().await.unwrap();
    let held_at_most = before_acquire.elapsed();
    assert_eq!(gauge("distlock_held", &[fam]), 0.0);
    let holds = histogram("distlock_hold_seconds", &[fam]);
    assert!(
        holds.len() == 1
            && holds[0] >= held_at_least.as_secs_f64()
            && holds[0] <= held_at_most.as_secs_f64(),
        "{holds:?} outside [{held_at_least:?}, {held_at_most:?}]"
    );
    // Unnamed families share "default"; names never become labels. Other tests of this
    // binary take "default" locks in parallel: at least this one counts. A counter, not the
    // held gauge: a hold another test took before this binary's recorder was installed
    // and released after it lowers the gauge by one it never raised (seen in full runs).
    let other = a.lock("order_2").await.unwrap();
    let default_acquired = ["outcome=acquired", "template=default"];
    assert!(counter("distlock_acquisitions_total", &default_acquired) >= 1);
    drop(other);
}

/// An unreachable Redis counts as `unavailable`, not as a busy lock.
#[tokio::test]
async fn an_unreachable_redis_counts_as_unavailable() {
    install();
    let mut server = RedisServer::start();
    let url = server.url();
    server.stop();
    let locks = builder(&url)
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = locks.lock("x").metrics_label("down").await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    let labels = ["template=down", "outcome=unavailable"];
    assert_eq!(counter("distlock_acquisitions_total", &labels), 1);
}

/// Library functions Redis has run so far (FCALL, FCALL_RO).
async fn script_calls(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_fcall:") || l.starts_with("cmdstat_fcall_ro:"))
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A hand-off wakes the waiter by message; a holder that vanishes silently wakes it by TTL.
#[tokio::test]
async fn wakeups_are_counted_by_message_and_by_ttl() {
    install();
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()), client(&server.url()));
    let mut conn = server.conn().await;
    // The waiters' pub/sub connection comes up with b's first wait and, as after a
    // reconnect, wakes every waiter once: a first wait on another lock gets that done.
    let warm = a.lock("warm").await.unwrap();
    let warmup = tokio::spawn({
        let b = b.clone();
        async move { b.lock("warm").await.map(drop) }
    });
    wait_until("b waits for the warm-up lock", GENEROUS, || async {
        b.waited_channels() == 1
    })
    .await;
    warm.release().await.unwrap();
    warmup.await.unwrap().unwrap();

    let guard = a.lock("w").metrics_label("wake").await.unwrap();
    let before = script_calls(&mut conn).await;
    let waiter = tokio::spawn(async move { b.lock("w").metrics_label("wake").await.map(drop) });
    // The waiter queues with a first attempt, subscribes to the channel, and tries once more
    // before it sleeps on it: a release before that second attempt would be taken by the
    // attempt, without a wake-up. After it, the hand-off's message wakes the waiter.
    wait_until("the waiter tried twice", GENEROUS, || {
        let mut conn = conn.clone();
        async move { script_calls(&mut conn).await >= before + 2 }
    })
    .await;
    guard.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        counter("distlock_wakeups_total", &["by=message", "template=wake"]),
        1
    );

    // A foreign holder (no release message) with a short lease.
    let key = lock_key("t");
    let _: () = redis::pipe()
        .hset(&key, "foreign:1", 1)
        .pexpire(&key, 300)
        .query_async(&mut conn)
        .await
        .unwrap();
    let c = client(&server.url());
    drop(c.lock("t").metrics_label("wake_ttl").await.unwrap());
    assert!(counter("distlock_wakeups_total", &["by=ttl", "template=wake_ttl"]) >= 1);
}

/// `extend` counts a renewal, or a renewal failure when Redis does not answer; a lock
/// deleted under its holder counts as lost and leaves the held gauge.
#[tokio::test]
async fn renewals_failures_and_losses_are_counted() {
    install();
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let fam = ["template=renew"];
    let guard = locks.lock("r").metrics_label("renew").await.unwrap();
    guard.extend(Duration::from_secs(5)).await.unwrap();
    // At least: the watchdog's renewals (every second) add to this series too.
    assert!(counter("distlock_renewals_total", &fam) >= 1);
    server.pause();
    assert!(guard.extend(Duration::from_secs(5)).await.is_err());
    server.resume();
    assert!(counter("distlock_renewal_failures_total", &fam) >= 1);
    locks.force_release("r").await.unwrap();
    assert!(guard
        .extend(Duration::from_secs(5))
        .await
        .unwrap_err()
        .is_lost());
    assert_eq!(counter("distlock_lost_total", &fam), 1);
    assert_eq!(gauge("distlock_held", &fam), 0.0);
    assert_eq!(histogram("distlock_hold_seconds", &fam).len(), 1);
}

/// The watchdog's renewals are counted: a lock still held after `t` was renewed at least
/// once per lease in `t` (else it would have been lost), and at most once per tick. The
/// lease is long enough that a loaded machine's late tick does not lose the lock.
#[tokio::test]
async fn watchdog_renewals_are_counted() {
    install();
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let locks = builder(&server.url()).lease(lease).build().unwrap();
    let before_acquire = Instant::now();
    let guard = locks.lock("wd").metrics_label("watchdog").await.unwrap();
    let acquired_at = Instant::now();
    let renewals = || counter("distlock_renewals_total", &["template=watchdog"]);
    wait_until("eight renewals", GENEROUS, || async {
        assert!(guard.is_held(), "lost after {} renewals", renewals());
        renewals() >= 8
    })
    .await;
    let held_for = acquired_at.elapsed();
    assert!(guard.is_held());
    let count = renewals();
    let per = |d: Duration, each: Duration| d.as_millis() / each.as_millis();
    let at_least = per(held_for, lease);
    let at_most = per(before_acquire.elapsed(), lease / 3) + 1;
    assert!(
        (at_least..=at_most).contains(&u128::from(count)),
        "{count} renewals in {held_for:?}: expected {at_least}..={at_most}"
    );
    drop(guard);
}

/// The tower layer labels its locks with its key template and records the request's
/// `x-request-id` with the hold, so operators can tie a stuck lock to a request.
#[tokio::test]
async fn the_layer_labels_by_template_and_records_the_request_id() {
    use axum::body::Body;
    use axum::extract::Path;
    use axum::routing::post;
    use tower::ServiceExt;

    install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    let inspector = locks.clone();
    let handler = post(move |Path(id): Path<u64>| async move {
        let state = inspector
            .inspect(format!("layer_{id}"))
            .await
            .expect("inspect");
        let holder = state.holder().expect("holder recorded");
        holder.request_id().unwrap_or("none").to_owned()
    });
    let layer = lock_tower::lock::DistributedLockLayer::builder(locks)
        .route("/items/{id}/buy")
        .key("layer_<id:u64>")
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/items/{id}/buy", handler)
        .route_layer(layer);
    let request = axum::http::Request::post("/items/7/buy")
        .header("x-request-id", "req-42")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap();
    assert_eq!(&body[..], b"req-42");
    let acquired = ["outcome=acquired", "template=layer_<id:u64>"];
    assert_eq!(counter("distlock_acquisitions_total", &acquired), 1);
    assert_eq!(gauge("distlock_held", &["template=layer_<id:u64>"]), 0.0);
}

/// A queued waiter's hold counts from its grant, not from the attempt before its wait: six
/// serialised 0.3 s holds once summed to 4.3 s.
#[tokio::test]
async fn hold_time_counts_from_the_grant_not_from_the_wait() {
    install();
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()), client(&server.url()));
    let first = a.lock("queued").metrics_label("hold_first").await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            let guard = b.lock("queued").metrics_label("hold_queued").await.unwrap();
            guard.release().await.unwrap();
        }
    });
    wait_until("b waits on the channel", GENEROUS, || async {
        b.waited_channels() == 1
    })
    .await;
    // Not for ordering: a wait long enough that counting it would show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    first.release().await.unwrap();
    waiter.await.unwrap();
    let holds = histogram("distlock_hold_seconds", &["template=hold_queued"]);
    let bound = released_at.elapsed().as_secs_f64();
    assert!(
        holds.len() == 1 && holds[0] <= bound,
        "{holds:?}: the hold began after {bound} s ago at the earliest"
    );
    let waits = histogram(
        "distlock_wait_seconds",
        &["template=hold_queued", "outcome=acquired"],
    );
    assert!(waits.len() == 1 && waits[0] >= 0.3, "{waits:?}");
}

/// A wait that times out while the holder's lease is long is no TTL wake-up: the counter
/// must reveal holders that vanished or messages that were missed, not impatient callers.
#[tokio::test]
async fn a_wait_timeout_is_no_ttl_wakeup() {
    install();
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()), client(&server.url()));
    let guard = a
        .lock("impatient")
        .metrics_label("impatient_holder")
        .await
        .unwrap();
    for _ in 0..3 {
        let err = b
            .lock("impatient")
            .metrics_label("impatient")
            .wait(Duration::from_millis(150))
            .await
            .unwrap_err();
        assert!(err.is_wait_timeout(), "{err}");
    }
    assert_eq!(
        counter("distlock_wakeups_total", &["by=ttl", "template=impatient"]),
        0
    );
    guard.release().await.unwrap();
}

/// Every series has a description (`# HELP` in Prometheus), given when a client is built.
#[tokio::test]
async fn every_series_is_described() {
    install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    let busy = client(&server.url());
    let guard = locks
        .lock("described")
        .metrics_label("described")
        .await
        .unwrap();
    assert!(busy
        .lock("described")
        .metrics_label("described")
        .wait(Duration::ZERO)
        .await
        .is_err());
    guard.extend(Duration::from_secs(5)).await.unwrap();
    guard.release().await.unwrap();
    for name in [
        "distlock_acquisitions_total",
        "distlock_contended_total",
        "distlock_wait_seconds",
        "distlock_hold_seconds",
        "distlock_held",
        "distlock_renewals_total",
    ] {
        let text = description(name);
        assert!(
            text.as_deref().is_some_and(|t| !t.is_empty()),
            "{name}: {text:?}"
        );
    }
}
