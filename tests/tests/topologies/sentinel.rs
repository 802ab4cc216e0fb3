//! Sentinel: the client finds the master through the Sentinels and follows a failover.

use std::time::Duration;

use distlock_tests::locks::{exists, lock_key, pttl, wait_until, GENEROUS};
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use lock_core::{LockClient, ReplicaAck};
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
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(5),
        })
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
    // it, so until then a required replica would (rightly) refuse: go on at default settings,
    // which wait for a replica only where the new master lists one.
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

/// An old master that the Sentinels cannot demote keeps accepting writes after a failover
/// (as one cut off from them does). A client connected to it must not go on granting and
/// renewing locks there: it asks a Sentinel every second where the master is, and moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaves_an_old_master_that_still_accepts_writes() {
    let set = RedisSentinels::start_with_undemotable_master();
    // Default settings: the client waits for the old master's replica; the new master will
    // have none (the old one cannot follow it), which the client learns again when it moves
    // there (or after a refusal on the old master, which its replica left).
    let locks = client(&set).build().unwrap();
    let held = locks
        .lock("split_held")
        .await
        .expect("acquire via sentinel");
    let old = set.master_port().expect("a master");
    let replica = set.servers.iter().find(|s| s.port() != old).unwrap();
    let replica_conn = replica.conn().await;
    wait_until("the replica has the lock", GENEROUS, || {
        let mut conn = replica_conn.clone();
        async move { exists(&mut conn, &lock_key("split_held")).await }
    })
    .await;
    drop(replica_conn);
    set.failover();
    let failed_over = Instant::now();
    let new = set.master_port().expect("a new master");
    let server = |port: u16| set.servers.iter().find(|s| s.port() == port).unwrap();
    let (mut old_conn, mut new_conn) = (server(old).conn().await, server(new).conn().await);
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut old_conn).await.unwrap();
    assert_eq!(
        redis::from_redis_value::<String>(role[0].clone()).unwrap(),
        "master",
        "the old master must still be a master for this test to mean anything"
    );

    // New locks of the same client land on the new master, soon.
    let mut probe = 0;
    wait_until("the client writes to the new master", GENEROUS, || {
        probe += 1;
        let (locks, name) = (locks.clone(), format!("split_probe_{probe}"));
        let mut new_conn = new_conn.clone();
        async move {
            let guard = match locks.lock(name.as_str()).try_acquire().await {
                Ok(Some(guard)) => guard,
                _ => return false,
            };
            let on_new = exists(&mut new_conn, &lock_key(&name)).await;
            drop(guard);
            on_new
        }
    })
    .await;
    println!(
        "sentinel: writes moved to the new master {:?} after the failover",
        failed_over.elapsed()
    );
    // The replicated hold is renewed on the new master, and a fresh client sees it there.
    wait_until("a renewal reached the new master", GENEROUS, || {
        let mut new_conn = new_conn.clone();
        async move { pttl(&mut new_conn, &lock_key("split_held")).await > 4_500 }
    })
    .await;
    assert!(held.is_held());
    let fresh = client(&set).build().unwrap();
    assert!(
        fresh
            .lock("split_held")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "the new master lost the replicated lock"
    );
    held.release().await.expect("released on the new master");
    assert!(!exists(&mut new_conn, &lock_key("split_held")).await);
}

/// The Sentinels flag their master down (its answers to their PINGs are refused) while it
/// serves everything else, and no replica can replace it: the master they still name, and
/// that says it is one, is used. The redis crate's lookup skips a master flagged
/// `s_down`/`o_down` and finds none; after a failover the Sentinels kept such a flag for
/// seconds while naming a working master, and every call of every client failed at once
/// (7 s, found by a 20-minute harness run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_the_sentinels_flag_down_but_still_name_is_used() {
    let mut set = RedisSentinels::start();
    // No replica to promote: the master stays named.
    tokio::task::block_in_place(|| set.servers[1].kill());
    let master = set.servers[0].url();
    let mut conn = redis::Client::open(master.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-ping"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut sentinels = Vec::new();
    for url in set.sentinel_urls() {
        let sentinel = redis::Client::open(url.as_str()).unwrap();
        sentinels.push(sentinel.get_multiplexed_async_connection().await.unwrap());
    }
    wait_until("every sentinel flags the master down", GENEROUS, || {
        let sentinels = sentinels.clone();
        async move {
            for mut sentinel in sentinels {
                let info: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
                    .arg(&["MASTER", SERVICE])
                    .query_async(&mut sentinel)
                    .await
                    .unwrap_or_default();
                if !info.get("flags").is_some_and(|f| f.contains("s_down")) {
                    return false;
                }
            }
            true
        }
    })
    .await;
    let locks = client(&set).build().unwrap();
    let guard = locks
        .lock("flagged")
        .await
        .expect("the named master is used");
    assert!(exists(&mut conn, &lock_key("flagged")).await);
    guard.release().await.unwrap();
}
