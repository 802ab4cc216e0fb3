//! Fault suite, Redis Cluster resharding: a lock's slot moves to another master, key batch
//! by key batch (as `redis-cli --cluster reshard` moves it), while the lock is held and
//! waited on.

use std::time::Duration;

use distlock_tests::fault::reshard::{keyslot, owner, Migration};
use distlock_tests::locks::{lock_key, wait_until, GENEROUS};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::LockClient;
use tokio::task::JoinHandle;

/// Below the redis crate's default wait before retrying a `TRYAGAIN` (1.28 s), so a call
/// that waited that long times out.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(1200);

fn client(cluster: &RedisCluster) -> LockClient {
    LockClient::cluster(cluster.seed_urls())
        .command_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap()
}

/// `TRYAGAIN` answers the cluster's nodes have given so far (`INFO errorstats`).
async fn tryagains(cluster: &RedisCluster) -> u64 {
    let mut total = 0;
    for node in cluster.nodes() {
        let info: String = redis::cmd("INFO")
            .arg("errorstats")
            .query_async(&mut node.conn().await)
            .await
            .unwrap();
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("errorstat_TRYAGAIN:count="))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap());
    }
    total
}

/// Every key of `slot` on `node`.
async fn keys_in_slot(node: &RedisServer, slot: u16) -> Vec<Vec<u8>> {
    redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query_async(&mut node.conn().await)
        .await
        .unwrap()
}

/// The slot of lock `name`, its master, and another master to move it to.
async fn slot_of(cluster: &RedisCluster, name: &str) -> (u16, usize, usize) {
    let slot = keyslot(&cluster.nodes()[0], lock_key(name).as_bytes())
        .await
        .unwrap();
    let source = owner(cluster, slot).await.unwrap();
    (slot, source, (source + 1) % cluster.nodes().len())
}

/// Waits until `call` has been refused with `TRYAGAIN` (or has ended), counting from
/// `before`.
async fn until_refused<T>(cluster: &RedisCluster, before: u64, call: &JoinHandle<T>) {
    wait_until("the call was answered TRYAGAIN", GENEROUS, || async {
        call.is_finished() || tryagains(cluster).await > before
    })
    .await;
}

/// A release sent while its lock's slot is mid-migration completes once the slot has
/// moved, and hands the lock to the waiter on the new owner, with a greater token — with no
/// key moved yet, and with the lock's keys split between the two masters. Two ways it
/// failed: with every key still on the source, the release deleted the lock and popped the
/// waiter, then stopped at the grant ("Script attempted to access a non local key": the
/// source serves no key it lacks, and the lock had just been deleted), the waiter
/// neither granted nor queued; with the keys split (Redis answers `TRYAGAIN`), the redis
/// crate's cluster client waited 1.28 s before retrying, past the command timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_mid_migration_hands_over_once_the_slot_has_moved() {
    let cluster = RedisCluster::start(3, 0);
    let (holder, waiter) = (client(&cluster), client(&cluster));
    for (name, moved_first) in [("resharded_a", 0), ("resharded_b", 1)] {
        let guard = holder.lock(name).await.unwrap();
        let first_token = guard.fencing_token();
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move { waiter.lock(name).wait(Duration::from_secs(60)).await }
        });
        let (slot, source, target) = slot_of(&cluster, name).await;
        // The lock and its waiter queue: one slot, by their tag.
        wait_until("the waiter queued", GENEROUS, || async {
            keys_in_slot(&cluster.nodes()[source], slot).await.len() == 2
        })
        .await;
        let mut migration = Migration::begin(&cluster, slot, target).await.unwrap();
        for _ in 0..moved_first {
            assert_eq!(migration.step(1).await.unwrap(), 1, "{name}: one key moved");
        }

        let before = tryagains(&cluster).await;
        let releasing = tokio::spawn(guard.release());
        until_refused(&cluster, before, &releasing).await;
        migration.drain(1, 10).await.unwrap();
        migration.finish(&cluster).await.unwrap();

        releasing
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: released once the slot moved: {e}"));
        let granted = tokio::time::timeout(GENEROUS, waiting)
            .await
            .unwrap_or_else(|_| panic!("{name}: the waiter is granted after the release"))
            .unwrap()
            .unwrap();
        assert!(granted.fencing_token() > first_token, "{name}");
        assert_eq!(owner(&cluster, slot).await.unwrap(), target, "{name}");
        granted.release().await.unwrap();
    }
}

/// A reader's hold lives in two keys (the hash and Redisson's timeout key, which the scripts
/// cannot declare): with the hash and the queue moved to the target and the timeout key not
/// yet, a write request there must not find the reader dead. The target serves a key it
/// lacks as missing, so a writer was granted beside the reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_writer_is_granted_beside_a_reader_whose_keys_are_split() {
    let cluster = RedisCluster::start(3, 0);
    let (reader, writer, other) = (client(&cluster), client(&cluster), client(&cluster));
    let name = "resharded_rw";
    let read = reader.read_lock(name).await.unwrap();
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.write_lock(name).wait(Duration::from_secs(60)).await }
    });
    let (slot, source, target) = slot_of(&cluster, name).await;
    // The hash, the reader's timeout key and the queue.
    wait_until("the writer queued", GENEROUS, || async {
        keys_in_slot(&cluster.nodes()[source], slot).await.len() == 3
    })
    .await;
    let mut migration = Migration::begin(&cluster, slot, target).await.unwrap();
    let keys = keys_in_slot(&cluster.nodes()[source], slot).await;
    let is_timeout = |k: &Vec<u8>| String::from_utf8_lossy(k).contains("rwlock_timeout");
    let (timeout, rest): (Vec<_>, Vec<_>) = keys.into_iter().partition(is_timeout);
    assert_eq!(timeout.len(), 1, "one reader, one timeout key");
    migration.migrate(&rest).await.unwrap();

    // Sent to the source, asked on to the target, where the hash and the queue now are.
    let before = tryagains(&cluster).await;
    let trying = tokio::spawn({
        let other = other.clone();
        async move { other.write_lock(name).try_acquire().await }
    });
    until_refused(&cluster, before, &trying).await;
    migration.migrate(&timeout).await.unwrap();
    migration.finish(&cluster).await.unwrap();

    let tried = trying.await.unwrap().expect("answered once the slot moved");
    assert!(tried.is_none(), "a writer was granted beside the reader");
    assert!(!waiting.is_finished(), "the waiting writer was granted");
    read.extend(Duration::from_secs(30))
        .await
        .expect("the reader still holds");
    read.release().await.unwrap();
    let granted = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the writer is granted after the reader left")
        .unwrap()
        .unwrap();
    granted.release().await.unwrap();
}
