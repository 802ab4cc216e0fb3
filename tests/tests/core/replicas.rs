//! `min_replicas`: an acquisition returns only once enough replicas have the hold, and the
//! `WAIT` for them never stalls the client's other commands. The replica reaches its master
//! through a proxy, so replication can be slowed down or stopped.

use std::time::Duration;

use distlock_tests::locks::{builder, client, exists, lock_key, wait_until, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use lock_core::LockClient;
use redis::AsyncCommands;
use tokio::time::Instant;

/// A master, and a replica connected to it through the returned proxy; in sync on return.
async fn master_and_replica() -> (RedisServer, TcpProxy, RedisServer) {
    let master = RedisServer::start();
    let link = TcpProxy::start(master.addr());
    let replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &link.addr().port().to_string()])
        .start();
    let replica_conn = replica.conn().await;
    wait_until("the replica is in sync", GENEROUS, || {
        let mut conn = replica_conn.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .unwrap();
            info.contains("master_link_status:up")
        }
    })
    .await;
    (master, link, replica)
}

/// True once the master knows that its replica acknowledged every write so far.
async fn replica_acked_everything(master: &mut redis::aio::MultiplexedConnection) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(master)
        .await
        .unwrap();
    let field = |prefix: &str| -> Option<u64> {
        let line = info.lines().find(|l| l.starts_with(prefix))?;
        let at = line
            .find("offset=")
            .map_or(prefix.len(), |i| i + "offset=".len());
        line[at..].split(',').next()?.trim().parse().ok()
    };
    matches!(
        (field("master_repl_offset:"), field("slave0:")),
        (Some(master), Some(acked)) if acked >= master
    )
}

fn replicated_client(master: &RedisServer) -> LockClient {
    builder(&master.url())
        .command_timeout(Duration::from_secs(10))
        .min_replicas(1, Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A lock handed over by the releasing holder (its script writes the grant, not the waiter)
/// is on the replica when the waiter's acquisition returns: the waiter's `WAIT` covers the
/// grant. Replication is slowed to 150 ms each way and the replica has acknowledged all
/// earlier writes, so a `WAIT` that counted only the waiter's own earlier writes would
/// return at once, 150 ms before the grant reaches the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_lock_is_on_the_replica_when_acquired() {
    let (master, link, replica) = master_and_replica().await;
    let holder = client(&master.url());
    let waiter = replicated_client(&master);
    let guard = holder.lock("handed").await.unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock("handed").wait(GENEROUS).await }
    });
    wait_until("the waiter queued", GENEROUS, || async {
        waiter.waited_channels() == 1
    })
    .await;
    let master_conn = master.conn().await;
    wait_until("the replica acknowledged every write", GENEROUS, || {
        let mut conn = master_conn.clone();
        async move { replica_acked_everything(&mut conn).await }
    })
    .await;
    link.set_latency(Duration::from_millis(150));
    guard.release().await.unwrap();
    let got = waiting.await.unwrap().expect("handed over and replicated");
    let owner = waiter
        .inspect("handed")
        .await
        .unwrap()
        .owner()
        .expect("held")
        .to_owned();
    let mut replica_conn = replica.conn().await;
    let count: Option<u64> = replica_conn.hget(lock_key("handed"), &owner).await.unwrap();
    assert_eq!(
        count,
        Some(1),
        "the replica does not have the new holder yet"
    );
    got.release().await.unwrap();
}

/// While an acquisition waits for a replica that stopped acknowledging, the same client
/// releases another lock at once: `WAIT` blocks only its own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_does_not_stall_other_locks() {
    let (master, link, _replica) = master_and_replica().await;
    let mut conn = master.conn().await;
    let locks = replicated_client(&master);
    let other = locks
        .lock("other")
        .await
        .expect("replicated while the link is up");
    link.blackhole(true);
    let stuck = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("stuck").await }
    });
    wait_until("the stuck lock was granted", GENEROUS, || {
        let mut conn = conn.clone();
        async move { exists(&mut conn, &lock_key("stuck")).await }
    })
    .await;
    let started = Instant::now();
    other.release().await.unwrap();
    println!(
        "replicas: release beside a stuck WAIT took {:?}",
        started.elapsed()
    );
    // The WAIT asks in slices of half the 10 s command timeout: a release queued behind it
    // would take seconds.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "release took {:?} behind the WAIT",
        started.elapsed()
    );
    assert!(!exists(&mut conn, &lock_key("other")).await);
    stuck.abort();
}

/// Every kind acquires on a client with `min_replicas`, and its hold is on the replica when
/// the acquisition returns. Pins the fix of a semaphore answering WRONGTYPE on every
/// acquisition: the replica check only knew the exclusive lock's hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_waits_for_its_replicas_without_a_redis_error() {
    let (master, _link, replica) = master_and_replica().await;
    let locks = replicated_client(&master);
    let replica_conn = replica.conn().await;
    let on_replica = |key: &'static str| {
        let mut conn = replica_conn.clone();
        async move { exists(&mut conn, &lock_key(key)).await }
    };
    let permit = locks.semaphore("k_sem", 2).await.expect("semaphore");
    assert!(
        on_replica("k_sem").await,
        "the permit is not on the replica"
    );
    let read = locks.read_lock("k_read").await.expect("read lock");
    assert!(on_replica("k_read").await);
    let write = locks.write_lock("k_write").await.expect("write lock");
    assert!(on_replica("k_write").await);
    let lock = locks.lock("k_lock").await.expect("lock");
    assert!(on_replica("k_lock").await);
    let all = locks
        .lock_all(["k_a", "k_b"])
        .acquire()
        .await
        .expect("lock_all");
    assert!(on_replica("k_a").await && on_replica("k_b").await);
    for guard in [permit, read, write, lock] {
        guard.release().await.unwrap();
    }
    all.release().await.unwrap();
}
