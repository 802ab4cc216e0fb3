//! Redis Cluster: locks across slots, wake-ups, slot sharing, renewal, replica acks, and a
//! planned failover that keeps the lock.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{builder, wait_until, OverlapDetector, GENEROUS};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockError, ReplicaAck};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

fn cluster_client(cluster: &RedisCluster) -> LockClient {
    LockClient::cluster(cluster.seed_urls())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn keyslot(conn: &mut MultiplexedConnection, key: impl redis::ToRedisArgs) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

/// Every key distlock writes for a name — lock (with its holder record), queue —
/// and its release channel (a shard channel) hash to the lock's slot and live on one node,
/// whatever the bytes of the name. Read from the cluster as distlock left it, with a holder
/// and a waiter.
#[tokio::test]
async fn companion_keys_share_the_slot() {
    let cluster = RedisCluster::start(3, 0);
    let (holder, waiter) = (cluster_client(&cluster), cluster_client(&cluster));
    let mut conns = Vec::new();
    for node in cluster.nodes() {
        conns.push(node.conn().await);
    }
    for name in ["item_7", "a{b}c", "{x}", "%7B"] {
        let guard = holder.lock(name).await.unwrap();
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move { waiter.lock(name).wait(Duration::from_secs(60)).await }
        });
        wait_until("the waiter queued", GENEROUS, || async {
            waiter.waited_channels() == 1
        })
        .await;
        let lock = holder.inspect(name).await.unwrap().key().to_vec();
        let slot = keyslot(&mut conns[0], &lock).await;
        // The waiter's client registers its channels before Redis has the subscriptions:
        // wait until the lock, its queue and both shard channels are all there.
        let deadline = tokio::time::Instant::now() + GENEROUS;
        let (keys, channels) = loop {
            let (keys, channels) = survey(&mut conns, &lock).await;
            if keys.len() == 2 && channels.len() == 2 {
                break (keys, channels);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: {keys:?} (lock, queue) and {channels:?} (the waiter's release and \
                 grants shard channels) after {GENEROUS:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let mut homes = Vec::new();
        for (i, item) in keys.iter().chain(&channels) {
            assert_eq!(
                keyslot(&mut conns[*i], item).await,
                slot,
                "{name}: {item:?}"
            );
            homes.push(*i);
        }
        homes.dedup();
        assert_eq!(homes.len(), 1, "{name}: keys and channel on several nodes");
        guard.release().await.unwrap();
        waiting.await.unwrap().unwrap().release().await.unwrap();
    }
}

/// The keys (lock, queue) and the shard channels on each node whose name holds `lock`, with
/// the node's index.
async fn survey(
    conns: &mut [redis::aio::MultiplexedConnection],
    lock: &[u8],
) -> (Vec<(usize, Vec<u8>)>, Vec<(usize, Vec<u8>)>) {
    let named = |item: &Vec<u8>| item.windows(lock.len()).any(|w| w == lock);
    let (mut keys, mut channels) = (Vec::new(), Vec::new());
    for (i, conn) in conns.iter_mut().enumerate() {
        let found: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
        // Sharded pub/sub: the subscription lives on the node that owns the slot.
        let subscribed: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .query_async(conn)
            .await
            .unwrap();
        keys.extend(found.into_iter().filter(named).map(|k| (i, k)));
        channels.extend(subscribed.into_iter().filter(named).map(|c| (i, c)));
    }
    (keys, channels)
}

/// 3 clients × 4 tasks over 6 names spread across the masters: no overlap on any name, and
/// waiters are woken across nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_across_slots() {
    let cluster = RedisCluster::start(3, 0);
    let names: Vec<String> = (0..6).map(|i| format!("order_{i}")).collect();
    let detectors: Arc<Vec<OverlapDetector>> =
        Arc::new(names.iter().map(|_| OverlapDetector::default()).collect());
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let locks = cluster_client(&cluster);
        for t in 0..4 {
            let (locks, detectors, names) = (locks.clone(), detectors.clone(), names.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..30 {
                    let i = (t + round) % names.len();
                    let guard = locks
                        .lock(&names[i])
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap();
                    detectors[i].enter();
                    tokio::task::yield_now().await;
                    detectors[i].exit();
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        detectors
            .iter()
            .map(OverlapDetector::overlaps)
            .sum::<usize>(),
        0
    );
    assert_eq!(
        detectors
            .iter()
            .map(OverlapDetector::entries)
            .sum::<usize>(),
        360
    );
}

/// A waiter on a 30 s lock acquires within 1 s of the release, whichever node holds it —
/// with sharded pub/sub (the default) and with plain pub/sub (`sharded_pubsub(false)`, for
/// clusters older than Redis 7).
#[tokio::test]
async fn waiter_wakes_across_nodes() {
    let cluster = RedisCluster::start(3, 0);
    for sharded in [true, false] {
        let client = || {
            LockClient::cluster(cluster.seed_urls())
                .sharded_pubsub(sharded)
                .command_timeout(Duration::from_secs(5))
                .build()
                .unwrap()
        };
        let (holder, waiter) = (client(), client());
        for name in ["wake_a", "wake_b", "wake_c"] {
            let guard = holder.lock(name).await.unwrap();
            let waiting = tokio::spawn({
                let waiter = waiter.clone();
                async move {
                    let got = waiter.lock(name).wait(Duration::from_secs(60)).await;
                    (got, Instant::now())
                }
            });
            wait_until("the waiter subscribed", GENEROUS, || async {
                waiter.waited_channels() == 1
            })
            .await;
            let released = Instant::now();
            guard.release().await.unwrap();
            let (got, at) = waiting.await.unwrap();
            assert!(
                at - released < Duration::from_secs(1),
                "{name} (sharded: {sharded}): {:?}",
                at - released
            );
            got.unwrap().release().await.unwrap();
        }
    }
}

/// The watchdog renews locks in many slots (batched per slot).
#[tokio::test]
async fn watchdog_renews_across_slots() {
    let cluster = RedisCluster::start(3, 0);
    let locks = LockClient::cluster(cluster.seed_urls())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..12 {
        guards.push(locks.lock(format!("long_{i}")).await.unwrap());
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(
            guards.iter().all(|g| g.is_held()),
            "a lock expired while held"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for g in guards {
        g.release().await.expect("still ours");
    }
}

/// `ReplicaAck::Require`: met on a cluster with a replica per master; unmet on a lone server
/// — then the acquisition fails and leaves no lock.
#[tokio::test]
async fn required_replicas_are_awaited() {
    let cluster = RedisCluster::start(3, 1);
    let locks = LockClient::cluster(cluster.seed_urls())
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(5),
        })
        .build()
        .unwrap();
    locks
        .lock("replicated")
        .await
        .expect("one replica acks")
        .release()
        .await
        .unwrap();

    let lone = RedisServer::start();
    let locks = builder(&lone.url())
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_millis(200),
        })
        .build()
        .unwrap();
    let err = locks.lock("unreplicated").await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::NotReplicated {
                acked: 0,
                required: 1,
                ..
            }
        ),
        "{err}"
    );
    let mut conn = lone.conn().await;
    let exists: bool = redis::cmd("EXISTS")
        .arg("distlock:unreplicated")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!exists, "a failed acquisition left its lock");
}

/// A planned `CLUSTER FAILOVER` of the lock's master keeps the lock: the client follows the
/// new master and keeps renewing. A waiter that subscribed to the lock's shard channel
/// before the failover is woken by the release after it, within 1 s (its own retries come
/// every 2 s): its subscription moved to the new master.
#[tokio::test]
async fn planned_failover_keeps_the_lock() {
    let cluster = RedisCluster::start(3, 1);
    // A 4 s lease: the failover pauses the old master's clients while the replica catches
    // up, and on a busy machine a renewal may wait for that and for the slot map's refresh.
    let locks = LockClient::cluster(cluster.seed_urls())
        .lease(Duration::from_secs(4))
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(5),
        })
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = locks.lock("failover").await.unwrap();
    let waiter = cluster_client(&cluster);
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            let got = waiter.lock("failover").wait(Duration::from_secs(60)).await;
            (got, Instant::now())
        }
    });
    wait_until("the waiter subscribed", GENEROUS, || async {
        waiter.waited_channels() == 1
    })
    .await;
    let replica = replica_of_key_master(&cluster, "distlock:failover").await;
    let mut conn = cluster.nodes()[replica].conn().await;
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query_async(&mut conn)
        .await
        .unwrap();
    wait_until("the replica became master", Duration::from_secs(30), || {
        let mut conn = conn.clone();
        async move {
            let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
            matches!(&role[0], redis::Value::BulkString(r) if r == b"master")
        }
    })
    .await;
    // Two lease lengths later the lock is still held: renewals reached the new master.
    let until = Instant::now() + Duration::from_secs(9);
    while Instant::now() < until {
        assert!(guard.is_held(), "lost across a planned failover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let released = Instant::now();
    guard.release().await.expect("released on the new master");
    let (got, acquired) = tokio::time::timeout(GENEROUS, waiting)
        .await
        .unwrap()
        .unwrap();
    got.expect("the waiter acquires").release().await.unwrap();
    assert!(
        acquired - released < Duration::from_secs(1),
        "the waiter woke {:?} after the release",
        acquired - released
    );
}

/// The index of a replica of the master that serves `key`'s slot (waits until the
/// cluster's slot map lists one: a fresh replica shows up once it has synced).
async fn replica_of_key_master(cluster: &RedisCluster, key: &str) -> usize {
    let mut conn = cluster.nodes()[0].conn().await;
    let slot = keyslot(&mut conn, key).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(port) = replica_port(&mut conn, slot).await {
            return cluster
                .nodes()
                .iter()
                .position(|n| n.port() == port)
                .expect("replica node");
        }
        assert!(
            Instant::now() < deadline,
            "no replica listed for slot {slot}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn replica_port(conn: &mut MultiplexedConnection, slot: i64) -> Option<u16> {
    let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .unwrap();
    let range = slots.into_iter().find(|range| {
        let start: i64 = redis::from_redis_value(range[0].clone()).unwrap();
        let end: i64 = redis::from_redis_value(range[1].clone()).unwrap();
        (start..=end).contains(&slot)
    })?;
    let replica: Vec<redis::Value> = redis::from_redis_value(range.get(3)?.clone()).unwrap();
    Some(redis::from_redis_value(replica[1].clone()).unwrap())
}

/// A multi-lock over names on different slots (different masters): all-or-nothing, opposite
/// orders from two clients do not deadlock, and nothing is left once released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multi_lock_across_slots() {
    let cluster = RedisCluster::start(3, 0);
    let mut conn = cluster.nodes()[0].conn().await;
    let names = ["acct_1", "acct_2", "acct_3"];
    let mut slots = Vec::new();
    for name in names {
        slots.push(keyslot(&mut conn, distlock_tests::locks::lock_key(name)).await);
    }
    slots.dedup();
    assert!(slots.len() > 1, "the names share a slot: {slots:?}");
    let detector = Arc::new(OverlapDetector::default());
    let mut tasks = Vec::new();
    for (i, order) in [names, [names[2], names[1], names[0]]]
        .into_iter()
        .cycle()
        .take(4)
        .enumerate()
    {
        let (locks, detector) = (cluster_client(&cluster), Arc::clone(&detector));
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let all = locks.lock_all(order).wait(Duration::from_secs(60)).await;
                let all = all.unwrap_or_else(|e| panic!("task {i}: {e}"));
                detector.enter();
                tokio::task::yield_now().await;
                detector.exit();
                all.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    assert_eq!((detector.entries(), detector.overlaps()), (100, 0));
    // A name held elsewhere fails the whole multi-lock and leaves the others free.
    let (locks, other) = (cluster_client(&cluster), cluster_client(&cluster));
    let held = other.lock("acct_2").await.unwrap();
    assert!(locks.lock_all(names).try_acquire().await.unwrap().is_none());
    for name in ["acct_1", "acct_3"] {
        let state = locks.inspect(name).await.unwrap();
        assert!(!state.is_held(), "{name} stayed held");
    }
    held.release().await.unwrap();
}

/// Read-write locks and semaphores on a Cluster: every key they write (the reader timeout
/// keys and the permits' records included) lives in the lock's slot, waiters are woken by
/// sharded pub/sub, and nothing is left afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_write_locks_and_semaphores_across_slots() {
    let cluster = RedisCluster::start(3, 0);
    let (locks, other) = (cluster_client(&cluster), cluster_client(&cluster));
    let mut conns = Vec::new();
    for node in cluster.nodes() {
        conns.push(node.conn().await);
    }
    for i in 0..3 {
        let name = format!("shelf_{i}");
        let readers = [
            locks.read_lock(&name).await.unwrap(),
            other.read_lock(&name).await.unwrap(),
        ];
        let permits = [
            locks.semaphore(format!("quota_{i}"), 2).await.unwrap(),
            other.semaphore(format!("quota_{i}"), 2).await.unwrap(),
        ];
        for lock in [
            distlock_tests::locks::lock_key(&name),
            distlock_tests::locks::lock_key(&format!("quota_{i}")),
        ] {
            let slot = keyslot(&mut conns[0], &lock).await;
            let mut found = 0;
            for conn in &mut conns {
                let keys: Vec<String> =
                    redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
                for key in keys.iter().filter(|k| k.contains(lock.as_str())) {
                    assert_eq!(keyslot(conn, key).await, slot, "{key}");
                    found += 1;
                }
            }
            assert!(found >= 2, "{lock}: {found} keys");
        }
        let writer = tokio::spawn({
            let other = other.clone();
            let name = name.clone();
            async move { other.write_lock(name).wait(Duration::from_secs(60)).await }
        });
        let third = tokio::spawn({
            let other = other.clone();
            async move {
                other
                    .semaphore(format!("quota_{i}"), 2)
                    .wait(Duration::from_secs(60))
                    .await
            }
        });
        wait_until("both waiters queued", GENEROUS, || async {
            other.waited_channels() == 2
        })
        .await;
        let released = Instant::now();
        for reader in readers {
            reader.release().await.unwrap();
        }
        let [first, second] = permits;
        first.release().await.unwrap();
        writer.await.unwrap().unwrap().release().await.unwrap();
        third.await.unwrap().unwrap().release().await.unwrap();
        second.release().await.unwrap();
        // Woken by the shard's messages, not by the 30 s lease.
        assert!(released.elapsed() < Duration::from_secs(20));
    }
    for conn in &mut conns {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
        assert!(keys.is_empty(), "{keys:?}");
    }
}

/// The watchdog renews semaphore permits in many slots: past several 1 s leases every permit
/// is held and its record (the hash beside the ZSET, renewed with it) still names its token;
/// nothing is left after the releases.
#[tokio::test]
async fn semaphore_permits_are_renewed_across_slots() {
    let cluster = RedisCluster::start(3, 0);
    let locks = LockClient::cluster(cluster.seed_urls())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let mut permits = Vec::new();
    for i in 0..6 {
        for _ in 0..2 {
            permits.push(locks.semaphore(format!("pool_{i}"), 2).await.unwrap());
        }
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(permits.iter().all(|p| p.is_held()), "a permit expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..6 {
        let state = locks.inspect(format!("pool_{i}")).await.unwrap();
        let mut recorded: Vec<u64> = state.holders().iter().map(|h| h.fencing_token()).collect();
        let mut held: Vec<u64> = permits[2 * i..2 * i + 2]
            .iter()
            .map(|p| p.fencing_token())
            .collect();
        recorded.sort_unstable();
        held.sort_unstable();
        assert_eq!(recorded, held, "pool_{i}: the records did not last");
    }
    for permit in permits {
        permit.release().await.expect("still ours");
    }
    for node in cluster.nodes() {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut node.conn().await)
            .await
            .unwrap();
        assert!(keys.is_empty(), "{keys:?}");
    }
}
