//! Failovers without reloads: the functions library replicates with the data, so a replica
//! promoted by the Sentinels or by the Cluster serves the library's calls without a
//! `FUNCTION LOAD` (a server restarted without data loads it once: core's `functions`).
//!
//! `INFO commandstats` counts the `FUNCTION LOAD` a replica applies from its master's
//! stream, so each test zeroes the replica's counters once it has the library.

use std::time::Duration;

use distlock_tests::locks::{
    command_calls, function_calls, has_library, reset_stats, wait_until, GENEROUS,
};
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::LockClient;
use redis::aio::MultiplexedConnection;

/// Waits until the replica of `conn` has the library, then zeroes its counters.
async fn replicated(conn: &mut MultiplexedConnection) {
    wait_until("the replica has the library", GENEROUS, || {
        let mut conn = conn.clone();
        async move { has_library(&mut conn).await }
    })
    .await;
    reset_stats(conn).await;
}

/// Takes and releases locks on `names` until the promoted node has served a function
/// call (the client finds the new master in its own time), then asserts that it loaded
/// nothing.
async fn served_without_a_load(locks: &LockClient, names: &[String], promoted: &RedisServer) {
    let conn = promoted.conn().await;
    wait_until("the promoted replica served a call", GENEROUS, || {
        let mut conn = conn.clone();
        async move {
            for name in names {
                if let Ok(Some(guard)) = locks.lock(name.as_str()).try_acquire().await {
                    let _ = guard.release().await;
                }
            }
            function_calls(&mut conn).await.0.is_some()
        }
    })
    .await;
    let (calls, stats) = command_calls(&mut conn.clone()).await;
    assert_eq!(
        calls.get("function|load"),
        None,
        "loaded after the failover: {stats}"
    );
}

/// After a Sentinel failover the promoted replica answers with the library it replicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_promoted_by_the_sentinels_needs_no_load() {
    let set = RedisSentinels::start();
    let locks = LockClient::sentinel(set.sentinel_urls(), SERVICE)
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // The first call loads the library on the master.
    locks.lock("before").await.unwrap().release().await.unwrap();
    replicated(&mut set.servers[1].conn().await).await;
    set.failover();
    let port = set.master_port().expect("a master after the failover");
    let promoted = set.servers.iter().find(|s| s.port() == port).unwrap();
    assert_eq!(
        promoted.port(),
        set.servers[1].port(),
        "the replica was promoted"
    );
    served_without_a_load(&locks, &["after".to_owned()], promoted).await;
}

/// After a Cluster master dies, its promoted replica answers with the library it
/// replicated: locks on all three masters' slots, before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_promoted_by_the_cluster_needs_no_load() {
    let mut cluster = RedisCluster::start(3, 1);
    let locks = LockClient::cluster(cluster.seed_urls())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // Thirty names hash to slots on every master: each loads the library where it misses.
    let names: Vec<String> = (0..30).map(|i| format!("promoted_{i}")).collect();
    for name in &names {
        locks
            .lock(name.as_str())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let masters = cluster.master_indices();
    for (i, node) in cluster.nodes().iter().enumerate() {
        assert!(node.is_running());
        if !masters.contains(&i) {
            replicated(&mut node.conn().await).await;
        }
    }
    let victim = masters[0];
    cluster.nodes_mut()[victim].kill();
    cluster
        .wait_until_healthy(Duration::from_secs(30))
        .expect("a replica promoted");
    let promoted = (cluster.master_indices().into_iter())
        .find(|i| !masters.contains(i))
        .expect("a promoted replica");
    served_without_a_load(&locks, &names, &cluster.nodes()[promoted]).await;
}
