//! Fault suite, Redis Cluster resharding: a lock's slot moves to another master, key batch
//! by key batch (as `redis-cli --cluster reshard` moves it), while the lock is held and
//! waited on.

use std::time::Duration;

use distlock_tests::fault::reshard::{keyslot, owner, Migration};
use distlock_tests::locks::{lock_key, wait_until, GENEROUS};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::LockClient;

/// Below the redis crate's default wait before retrying a `TRYAGAIN` (1.28 s), so a call
/// that waited that long times out.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(1200);

/// `TRYAGAIN` answers `node` has given so far (`INFO errorstats`).
async fn tryagains(node: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut node.conn().await)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_TRYAGAIN:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Keys in `slot` on `node`.
async fn keys_in_slot(node: &RedisServer, slot: u16) -> u64 {
    redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query_async(&mut node.conn().await)
        .await
        .unwrap()
}

/// A release sent while its lock's keys are split between the two masters of a migration
/// (Redis answers `TRYAGAIN` to any script naming them) completes once the slot has moved,
/// and the waiter is then granted on the new owner, with a greater token. The redis crate's
/// cluster client waits at least 1.28 s before retrying a `TRYAGAIN`: the release timed out
/// after its command timeout although the slot had moved in milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_mid_migration_completes_once_the_slot_has_moved() {
    let cluster = RedisCluster::start(3, 0);
    let client = || {
        LockClient::cluster(cluster.seed_urls())
            .command_timeout(COMMAND_TIMEOUT)
            .build()
            .unwrap()
    };
    let (holder, waiter) = (client(), client());
    let name = "resharded";
    let guard = holder.lock(name).await.unwrap();
    let first_token = guard.fencing_token();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock(name).wait(Duration::from_secs(60)).await }
    });

    let nodes = cluster.nodes();
    let slot = keyslot(&nodes[0], lock_key(name).as_bytes()).await.unwrap();
    let source = owner(&cluster, slot).await.unwrap();
    // The lock, its waiter queue and the waiters' deadlines: one slot, by their hash tag.
    wait_until("the waiter queued", GENEROUS, || async {
        keys_in_slot(&nodes[source], slot).await == 3
    })
    .await;
    let target = (source + 1) % 3;
    let mut migration = Migration::begin(&cluster, slot, target).await.unwrap();
    assert_eq!(migration.step(1).await.unwrap(), 1, "one key moved");

    let refused = tryagains(&nodes[source]).await + tryagains(&nodes[target]).await;
    let releasing = tokio::spawn(guard.release());
    wait_until("the release was answered TRYAGAIN", GENEROUS, || async {
        tryagains(&nodes[source]).await + tryagains(&nodes[target]).await > refused
    })
    .await;
    migration.drain(1, 10).await.unwrap();
    migration.finish(&cluster).await.unwrap();

    releasing
        .await
        .unwrap()
        .expect("released once the slot moved");
    let granted = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the waiter is granted after the release")
        .unwrap()
        .unwrap();
    assert!(granted.fencing_token() > first_token);
    assert_eq!(owner(&cluster, slot).await.unwrap(), target);
    granted.release().await.unwrap();
}
