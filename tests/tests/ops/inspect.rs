//! Operating locks: holder metadata seen from another client, wait timeouts that name the
//! holder, inspection, listing (also on a Cluster) and forced release.

use std::time::Duration;

use distlock_tests::fault::wait_renewed;
use distlock_tests::locks::{builder, client, exists, lock_key, wait_until, GENEROUS};
use distlock_tests::redisson::RedissonLock;
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockError};

fn service(url: &str, name: &str, host: &str) -> LockClient {
    builder(url)
        .service_name(name)
        .holder_host(host)
        .build()
        .unwrap()
}

/// Who holds a lock, since when, with which request, is visible from any other client; the
/// lock hash keeps Redisson's layout (owner → count) plus the record's own field, which
/// goes with the lock.
#[tokio::test]
async fn holder_metadata_is_visible_from_another_client() {
    let server = RedisServer::start();
    let billing = service(&server.url(), "billing", "web-3");
    let before = std::time::SystemTime::now() - Duration::from_secs(1);
    let guard = billing
        .lock("invoice_9")
        .request_id("req-42")
        .await
        .unwrap();
    let state = client(&server.url()).inspect("invoice_9").await.unwrap();
    assert!(state.is_held());
    assert_eq!(state.name().as_bytes(), b"invoice_9");
    assert_eq!(state.key(), lock_key("invoice_9").as_bytes());
    assert_eq!(state.hold_count(), 1);
    assert_eq!(state.fencing_token(), guard.fencing_token());
    assert!(state.remaining_ttl().is_some_and(|t| t > Duration::ZERO));
    let holder = state.holder().expect("a holder record");
    assert_eq!(holder.service(), "billing");
    assert_eq!(holder.host(), "web-3");
    assert_eq!(holder.pid(), Some(std::process::id()));
    assert_eq!(holder.request_id(), Some("req-42"));
    assert_eq!(Some(holder.owner()), state.owner());
    assert!(holder.acquired_at() >= before);

    let mut conn = server.conn().await;
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(lock_key("invoice_9"))
        .query_async(&mut conn)
        .await
        .unwrap();
    fields.sort();
    let record = format!(
        "{}\u{1f}{}\u{1f}billing\u{1f}web-3\u{1f}{}\u{1f}req-42",
        guard.fencing_token(),
        holder.owner(),
        std::process::id()
    );
    let mut expected = vec![
        (holder.owner().to_owned(), "1".to_owned()),
        ("distlock:holder".to_owned(), record),
    ];
    expected.sort();
    assert_eq!(fields, expected);
    guard.release().await.unwrap();
    assert!(!exists(&mut conn, &lock_key("invoice_9")).await);
    let state = client(&server.url()).inspect("invoice_9").await.unwrap();
    assert!(!state.is_held() && state.holder().is_none());
}

/// A wait timeout says who holds the lock and since when, from the busy answer itself.
#[tokio::test]
async fn wait_timeout_names_the_holder() {
    let server = RedisServer::start();
    let _guard = service(&server.url(), "billing", "web-3")
        .lock("item_7")
        .await
        .unwrap();
    let err = client(&server.url())
        .lock("item_7")
        .wait(Duration::from_millis(100))
        .await
        .unwrap_err();
    let LockError::WaitTimeout { holder, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(holder.as_ref().unwrap().service(), "billing");
    let text = err.to_string();
    let pid = std::process::id();
    assert!(
        text.contains(&format!("held by billing@web-3 (pid {pid}) since 20")),
        "{text}"
    );
}

/// A hand-off writes the grantee's own metadata (it travelled in its queue entry).
#[tokio::test]
async fn handoff_records_the_waiters_metadata() {
    let server = RedisServer::start();
    let first = service(&server.url(), "billing", "web-3");
    let second = service(&server.url(), "orders|eu", "web-4");
    let guard = first.lock("h").await.unwrap();
    let waiter = tokio::spawn(async move {
        let g = second.lock("h").request_id("r|2").await.unwrap();
        let token = g.fencing_token();
        (g, token)
    });
    let inspector = client(&server.url());
    wait_until("the waiter queued", GENEROUS, || async {
        inspector.inspect("h").await.unwrap().waiters() == 1
    })
    .await;
    guard.release().await.unwrap();
    let (g, token) = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    let state = inspector.inspect("h").await.unwrap();
    let holder = state.holder().expect("the grantee's record");
    assert_eq!(holder.service(), "orders|eu");
    assert_eq!(holder.host(), "web-4");
    assert_eq!(holder.request_id(), Some("r|2"));
    assert_eq!(state.fencing_token(), token);
    assert_eq!(state.waiters(), 0);
    drop(g);
}

/// The watchdog keeps the holder record alive with the lock: each renewal (every 200 ms)
/// extends it too, so it never expires, also past its first 600 ms lease.
#[tokio::test]
async fn renewals_extend_the_holder_record() {
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let guard = locks.lock("long").await.unwrap();
    let mut conn = server.conn().await;
    // The record is a field of the lock: renewing the lock renews it. Four extensions,
    // 200 ms apart, take it past the first lease, and the record is still there.
    for _ in 0..4 {
        wait_renewed(&mut conn, &lock_key("long"), GENEROUS).await;
    }
    assert!(guard.is_held());
    let state = locks.inspect("long").await.unwrap();
    assert!(state.holder().is_some());
}

/// A lock held by a Redisson client shows its owner, without a record.
#[tokio::test]
async fn redisson_holds_show_an_owner_without_a_record() {
    let server = RedisServer::start();
    let mut java = RedissonLock::new(&server.url(), &lock_key("shared"), 1).await;
    assert_eq!(java.try_lock(Duration::from_secs(10)).await, None);
    let state = client(&server.url()).inspect("shared").await.unwrap();
    assert!(state.is_held() && state.holder().is_none());
    assert!(state.owner().unwrap().ends_with(":1"));
}

/// Forcing a release hands the lock to the waiter, and the old guard reports it lost: told
/// at once on its client's revocation channel, or (had it missed the message) at its next
/// renewal, within one watchdog tick (1 s), before its 3 s lease could run out.
#[tokio::test]
async fn force_release_wakes_a_waiter_and_the_old_guard_is_lost() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let stuck = builder(&server.url()).lease(lease).build().unwrap();
    let guard = stuck.lock("stuck").await.unwrap();
    let lost = guard.lost();
    let other = client(&server.url());
    let waiter = tokio::spawn(async move { other.lock("stuck").wait(GENEROUS).await });
    let operator = client(&server.url());
    wait_until("the waiter queued", GENEROUS, || async {
        operator.inspect("stuck").await.unwrap().waiters() == 1
    })
    .await;
    assert!(operator.force_release("stuck").await.unwrap());
    // The last renewal was at most one tick (lease / 3) ago, so the lease lasts at least
    // another 2 s; the next tick comes within 1 s.
    tokio::time::timeout(lease / 2, lost)
        .await
        .expect("the old guard is lost at the next watchdog tick");
    let LockError::Lost { reason, .. } = guard.lost_error() else {
        unreachable!("lost_error is always Lost")
    };
    assert!(
        reason.contains("force-released") || reason.contains("renewal found the lock"),
        "{reason}"
    );
    let next = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(next.fencing_token() > guard.fencing_token());
    let err = guard.release().await.unwrap_err();
    assert!(matches!(err, LockError::NotHeld { .. }), "{err}");
    assert!(next.is_held());
    next.release().await.unwrap();
    assert!(!operator.force_release("stuck").await.unwrap());
}

/// `list` matches the key prefix and name prefix literally, glob characters included.
#[tokio::test]
async fn list_escapes_glob_characters_in_prefixes() {
    let server = RedisServer::start();
    let url = server.url();
    let odd = builder(&url).key_prefix("app[1]:").build().unwrap();
    let plain = builder(&url).key_prefix("app1:").build().unwrap();
    let _held = [
        odd.lock("a?").await.unwrap(),
        odd.lock("ab").await.unwrap(),
        plain.lock("a?").await.unwrap(),
    ];
    let names = |locks: Vec<lock_core::ops::LockState>| -> Vec<String> {
        let names = locks.iter().map(|s| s.name().to_string());
        names.collect()
    };
    assert_eq!(names(odd.list("").await.unwrap()), ["a?", "ab"]);
    assert_eq!(names(odd.list("a?").await.unwrap()), ["a?"]);
    assert_eq!(names(plain.list("").await.unwrap()), ["a?"]);
}

/// On a Cluster, `list` scans every master: locks spread over all slots are all found.
#[tokio::test]
async fn list_spans_every_cluster_master() {
    let cluster = RedisCluster::start(3, 0);
    let locks = LockClient::cluster(cluster.seed_urls())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..24 {
        guards.push(locks.lock(format!("item_{i:02}")).await.unwrap());
    }
    let listed = locks.list("item_").await.unwrap();
    let names: Vec<String> = listed.iter().map(|s| s.name().to_string()).collect();
    let expected: Vec<String> = (0..24).map(|i| format!("item_{i:02}")).collect();
    assert_eq!(names, expected);
    assert!(listed.iter().all(|s| s.holder().is_some()));
}
