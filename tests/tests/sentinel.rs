//! Sentinel: the client finds the master through the Sentinels and follows a failover.

use std::time::Duration;

use distlock_tests::locks::{wait_until, GENEROUS};
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use lock_core::LockClient;
use tokio::time::Instant;

/// A lease that outlasts the seconds a Sentinel failover takes (the old master keeps
/// answering until the Sentinels demote it, then the client asks them again).
fn client(set: &RedisSentinels) -> lock_core::LockClientBuilder {
    LockClient::sentinel(set.sentinel_urls(), SERVICE)
        .lease(Duration::from_secs(6))
        .command_timeout(Duration::from_secs(2))
}

/// Sentinels demote the old master on their next check of it (up to ~10 s).
const FAILOVER_SETTLES: Duration = Duration::from_secs(40);

/// After a failover, a guard whose key was replicated stays held (renewals reach the new
/// master), new locks work, and a waiter is still woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_the_new_master_after_failover() {
    let set = RedisSentinels::start();
    let locks = client(&set)
        .min_replicas(1, Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = locks.lock("order_1").await.expect("acquire via sentinel");
    let old_master = set.master_port();
    set.failover();
    assert_ne!(set.master_port(), old_master);
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert!(
            guard.is_held(),
            "a replicated lock was lost across the failover"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    guard.release().await.expect("released on the new master");

    // The demoted master becomes the new master's replica only when the Sentinels next check
    // it, so until then `min_replicas` would (rightly) refuse: go on without it.
    let locks = client(&set).build().unwrap();

    let other = locks
        .lock("order_2")
        .wait(GENEROUS)
        .await
        .expect("new lock on the new master");
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("order_2").wait(Duration::from_secs(60)).await }
    });
    wait_until("the waiter subscribed", GENEROUS, || async {
        locks.waited_channels() == 1
    })
    .await;
    other.release().await.unwrap();
    let next = tokio::time::timeout(GENEROUS, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    next.release().await.unwrap();
}

/// A guard whose key is not on the new master reports lost at its next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_lost_when_the_key_did_not_survive() {
    let set = RedisSentinels::start();
    let locks = client(&set).build().unwrap();
    let guard = locks.lock("order_3").await.unwrap();
    set.failover();
    // As if the write had not reached the replica before it was promoted.
    let port = set.master_port().expect("new master");
    let new_master = set
        .servers
        .iter()
        .find(|s| s.port() == port)
        .expect("a known server");
    let mut conn = new_master.conn().await;
    let _: () = redis::cmd("DEL")
        .arg("distlock:order_3")
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::timeout(FAILOVER_SETTLES, guard.lost())
        .await
        .expect("lost() fired");
}
