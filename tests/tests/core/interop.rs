//! distlock and Redisson's RLock exclude each other on one name and wake each other.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{builder, wait_until, OverlapDetector, GENEROUS};
use distlock_tests::redisson::RedissonLock;
use distlock_tests::{RedisCluster, RedisServer};
use futures_util::StreamExt;
use lock_core::LockClient;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(30);

/// Two distlock tasks and two Redisson threads take turns on one name: 0 overlaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_holds_between_distlock_and_redisson() {
    let server = RedisServer::start();
    let detector = Arc::new(OverlapDetector::default());
    let locks = builder(&server.url()).key_prefix("").build().unwrap();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (locks, detector) = (locks.clone(), detector.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let guard = locks
                    .lock("shared")
                    .wait(Duration::from_secs(60))
                    .await
                    .unwrap();
                detector.enter();
                tokio::task::yield_now().await;
                detector.exit();
                guard.release().await.unwrap();
            }
        }));
    }
    for thread in 1..=2 {
        let mut redisson = RedissonLock::new(&server.url(), "shared", thread).await;
        let detector = detector.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                redisson.lock(LEASE, Duration::from_secs(60)).await;
                detector.enter();
                tokio::task::yield_now().await;
                detector.exit();
                assert_eq!(redisson.unlock(LEASE).await, Some(1));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(detector.entries(), 200);
    assert_eq!(detector.overlaps(), 0);
}

/// A distlock waiter wakes on Redisson's release, and a Redisson waiter on distlock's.
#[tokio::test]
async fn each_wakes_on_the_others_release() {
    let server = RedisServer::start();
    let locks = builder(&server.url()).key_prefix("").build().unwrap();
    let mut redisson = RedissonLock::new(&server.url(), "shared", 1).await;

    let guard = distlock_wakes_on_redissons_release(&locks, &mut redisson).await;

    assert!(
        redisson.try_lock(LEASE).await.is_some(),
        "Redisson must see distlock's hold"
    );
    assert!(redisson.renew(LEASE).await.eq(&false));
    // A Redisson thread blocked in lock() (30 s lease on distlock's hold) is woken by
    // distlock's release message, not by the lease running out.
    let mut watcher = server.client().get_async_pubsub().await.unwrap();
    watcher.subscribe(redisson.channel()).await.unwrap();
    let blocked = tokio::spawn(async move {
        redisson.lock(LEASE, GENEROUS).await;
        (redisson, Instant::now())
    });
    let conn = server.conn().await;
    wait_until("Redisson subscribed", GENEROUS, || {
        let mut conn = conn.clone();
        async move {
            let subscribers: Vec<(String, usize)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redisson_lock__channel:{shared}")
                .query_async(&mut conn)
                .await
                .unwrap();
            // The watcher and the blocked thread.
            subscribers[0].1 == 2
        }
    })
    .await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let message = tokio::time::timeout(GENEROUS, watcher.on_message().next())
        .await
        .expect("Redisson's channel got the release")
        .unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    let (mut redisson, acquired) = tokio::time::timeout(GENEROUS, blocked)
        .await
        .expect("Redisson's lock() returned")
        .unwrap();
    assert!(
        acquired - released < Duration::from_secs(1),
        "Redisson woke after {:?}",
        acquired - released
    );
    assert_eq!(redisson.unlock(LEASE).await, Some(1));
}

/// With distlock's default key prefix, the lock `order_9` is Redisson's
/// `getLock("distlock:order_9")`: the same Redis key, so they exclude each other.
#[tokio::test]
async fn default_prefix_is_the_redisson_name_with_the_prefix() {
    let server = RedisServer::start();
    let locks = builder(&server.url()).build().unwrap();
    let mut redisson = RedissonLock::new(
        &server.url(),
        &distlock_tests::locks::lock_key("order_9"),
        1,
    )
    .await;
    let guard = locks.lock("order_9").await.unwrap();
    assert!(
        redisson.try_lock(LEASE).await.is_some(),
        "Redisson saw it free"
    );
    guard.release().await.unwrap();
    assert_eq!(redisson.try_lock(LEASE).await, None);
    assert!(
        locks.lock("order_9").try_acquire().await.unwrap().is_none(),
        "distlock saw Redisson's hold as free"
    );
    assert_eq!(redisson.unlock(LEASE).await, Some(1));
}

/// On a Redis Cluster, Redisson 3.23+ waits and publishes with sharded pub/sub; so does
/// distlock there: a distlock waiter wakes on Redisson's release and a blocked Redisson
/// `lock()` on distlock's, each within 1 s (their own retries would take 2 s and 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_each_wakes_on_the_others_sharded_release() {
    let cluster = RedisCluster::start(3, 0);
    let locks = LockClient::cluster(cluster.seed_urls())
        .key_prefix("")
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut redisson = RedissonLock::cluster(&cluster.seed_urls(), "shared", 1).await;

    let guard = distlock_wakes_on_redissons_release(&locks, &mut redisson).await;

    let blocked = tokio::spawn(async move {
        redisson.lock(LEASE, GENEROUS).await;
        (redisson, Instant::now())
    });
    // Redisson's lock() subscribes after its first try found the lock busy.
    let mut conns = Vec::new();
    for node in cluster.nodes() {
        conns.push(node.conn().await);
    }
    wait_until("Redisson subscribed", GENEROUS, || {
        let conns = conns.clone();
        async move {
            for mut conn in conns {
                let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg("redisson_lock__channel:{shared}")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if counts[0].1 > 0 {
                    return true;
                }
            }
            false
        }
    })
    .await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let (mut redisson, acquired) = tokio::time::timeout(GENEROUS, blocked)
        .await
        .expect("Redisson's lock() returned")
        .unwrap();
    assert!(
        acquired - released < Duration::from_secs(1),
        "Redisson woke {:?} after distlock's release",
        acquired - released
    );
    assert_eq!(redisson.unlock(LEASE).await, Some(1));
}

/// Redisson holds `shared`; a distlock waiter (whose own retries come every 2 s) acquires
/// within 1 s of Redisson's release: it was woken by the release message.
async fn distlock_wakes_on_redissons_release(
    locks: &LockClient,
    redisson: &mut RedissonLock,
) -> lock_core::LockGuard {
    assert_eq!(redisson.try_lock(LEASE).await, None);
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move {
            let got = locks.lock("shared").wait(Duration::from_secs(60)).await;
            (got, Instant::now())
        }
    });
    wait_until("distlock subscribed", GENEROUS, || async {
        locks.waited_channels() == 1
    })
    .await;
    let released = Instant::now();
    assert_eq!(redisson.unlock(LEASE).await, Some(1));
    let (guard, acquired) = waiting.await.unwrap();
    let guard = guard.expect("distlock acquires after Redisson's release");
    assert!(
        acquired - released < Duration::from_secs(1),
        "distlock woke {:?} after Redisson's release",
        acquired - released
    );
    guard
}
