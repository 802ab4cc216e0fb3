//! Replica acknowledgements (`ReplicaAck`): an acquisition returns only once enough replicas
//! have the hold, and the `WAIT` for them never stalls the client's other commands. By
//! default one replica is waited for where the master has one online, learned when the
//! client connects: where it has none, no call and no connection is added per acquisition.
//! The replica reaches its master through a proxy, so replication can be slowed down or
//! stopped (or it is frozen with SIGSTOP).

use std::time::Duration;

use distlock_tests::locks::{
    builder, client, command_calls, exists, lock_key, reset_stats, wait_until, GENEROUS,
};
use distlock_tests::{RedisServer, TcpProxy};
use lock_core::{LockClient, ReplicaAck};
use redis::AsyncCommands;
use tokio::time::Instant;

/// A master, and a replica connected to it through the returned proxy; in sync on return,
/// and online for the master (which puts a replica online at its first acknowledgement,
/// after the replica saw its link up).
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
    wait_until("the master lists its replica online", GENEROUS, || {
        online_replicas(&master)
    })
    .await;
    (master, link, replica)
}

/// True when `master` has one replica online: `WAIT 0 0` on a new connection (which wrote
/// nothing), as the client asks.
async fn online_replicas(master: &RedisServer) -> bool {
    let mut conn = master.conn().await;
    let online: u64 = redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query_async(&mut conn)
        .await
        .unwrap();
    online == 1
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
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(30),
        })
        .build()
        .unwrap()
}

/// A client at default settings (`ReplicaAck::Auto`), with a generous command timeout.
fn default_client(server: &RedisServer) -> LockClient {
    builder(&server.url())
        .command_timeout(Duration::from_secs(10))
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

/// Every kind acquires on a client that requires a replica, and on one at default settings,
/// and its hold is on the replica when the acquisition returns. Pins the fix of a semaphore
/// answering WRONGTYPE on every acquisition: the replica check only knew the exclusive
/// lock's hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_waits_for_its_replicas_without_a_redis_error() {
    let (master, _link, replica) = master_and_replica().await;
    every_kind_is_on_the_replica(&replicated_client(&master), &replica, "required").await;
    every_kind_is_on_the_replica(&default_client(&master), &replica, "default").await;
}

/// Takes every kind of hold on `locks` (names starting with `tag`), each on `replica` when
/// its acquisition returns.
async fn every_kind_is_on_the_replica(locks: &LockClient, replica: &RedisServer, tag: &str) {
    let replica_conn = replica.conn().await;
    let on_replica = |name: String| {
        let mut conn = replica_conn.clone();
        async move { exists(&mut conn, &lock_key(&name)).await }
    };
    let name = |kind: &str| format!("{tag}_{kind}");
    let permit = locks.semaphore(name("sem"), 2).await.expect("semaphore");
    assert!(
        on_replica(name("sem")).await,
        "the permit is not on the replica"
    );
    let read = locks.read_lock(name("read")).await.expect("read lock");
    assert!(on_replica(name("read")).await);
    let write = locks.write_lock(name("write")).await.expect("write lock");
    assert!(on_replica(name("write")).await);
    let lock = locks.lock(name("lock")).await.expect("lock");
    assert!(on_replica(name("lock")).await);
    let all = locks
        .lock_all([name("a"), name("b")])
        .acquire()
        .await
        .expect("lock_all");
    assert!(on_replica(name("a")).await && on_replica(name("b")).await);
    for guard in [permit, read, write, lock] {
        guard.release().await.unwrap();
    }
    all.release().await.unwrap();
}

/// A field of `INFO <section>` as a number.
async fn info_field(
    conn: &mut redis::aio::MultiplexedConnection,
    section: &str,
    field: &str,
) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .unwrap();
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {info}"))
}

/// What `cycles` uncontended acquire + release cycles of `locks` cost on `server`, after one
/// cycle that connected, loaded the library and learned the replicas.
#[derive(Debug)]
struct Cost {
    fcalls: u64,
    waits: u64,
    /// Connections the server accepted during the cycles.
    connections: u64,
    /// Client connections open at the end (replicas' links are not counted).
    clients: u64,
}

async fn cost_of_cycles(locks: &LockClient, server: &RedisServer, cycles: u64) -> Cost {
    let mut conn = server.conn().await;
    locks.lock("warm").await.unwrap().release().await.unwrap();
    reset_stats(&mut conn).await;
    for i in 0..cycles {
        let guard = locks.lock(format!("cycle_{i}")).await.unwrap();
        guard.release().await.unwrap();
    }
    let (calls, _) = command_calls(&mut conn).await;
    let count = |command: &str| calls.get(command).copied().unwrap_or(0);
    Cost {
        fcalls: count("fcall"),
        waits: count("wait"),
        connections: info_field(&mut conn, "stats", "total_connections_received").await,
        clients: info_field(&mut conn, "clients", "connected_clients").await,
    }
}

/// At default settings, a server without replicas costs nothing more per acquisition:
/// 2 calls per cycle (acquire, release), no `WAIT`, no connection made — the client learned
/// at its first acquisition that there is no replica. The control, a master with a replica:
/// each cycle adds a `TOUCH` and a `WAIT`, on one connection more (the replication
/// connection), and still no connection per acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_adds_no_call_or_connection_without_a_replica() {
    const CYCLES: u64 = 50;
    let lone = RedisServer::start();
    let alone = cost_of_cycles(&default_client(&lone), &lone, CYCLES).await;
    let (master, _link, _replica) = master_and_replica().await;
    let replicated = cost_of_cycles(&default_client(&master), &master, CYCLES).await;
    println!("replicas: {CYCLES} cycles without a replica {alone:?}, with one {replicated:?}");
    assert_eq!((alone.fcalls, alone.waits), (2 * CYCLES, 0), "{alone:?}");
    assert_eq!(alone.connections, 0, "{alone:?}");
    assert_eq!(replicated.fcalls, 3 * CYCLES, "{replicated:?}");
    assert!(replicated.waits >= CYCLES, "{replicated:?}");
    assert_eq!(replicated.connections, 0, "{replicated:?}");
    assert_eq!(
        replicated.clients,
        alone.clients + 1,
        "{alone:?} {replicated:?}"
    );
}

/// A multi-lock whose names are free takes them in one call and waits for the replica once
/// for all of them: one `TOUCH`, one `WAIT`, and every name is on the replica on return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_waits_once_for_all_its_names() {
    let (master, _link, replica) = master_and_replica().await;
    let locks = default_client(&master);
    locks.lock("warm").await.unwrap().release().await.unwrap();
    let (mut conn, mut replica_conn) = (master.conn().await, replica.conn().await);
    reset_stats(&mut conn).await;
    let names = ["m_a", "m_b", "m_c", "m_d"];
    let all = locks.lock_all(names).acquire().await.expect("lock_all");
    let (calls, stats) = command_calls(&mut conn).await;
    let count = |command: &str| calls.get(command).copied().unwrap_or(0);
    assert_eq!((count("fcall"), count("wait")), (2, 1), "{stats}");
    for name in names {
        assert!(exists(&mut replica_conn, &lock_key(name)).await, "{name}");
    }
    all.release().await.unwrap();
}

/// The timeout path: with its replica frozen (SIGSTOP, the link still up), a master still
/// lists it, so an acquisition at default settings waits for it for 1 s, then gives the
/// lock back and fails with `NotReplicated` — the name is free again at once. Asked again
/// (what it knew was forgotten with the refusal), the master still lists the replica: the
/// next acquisition is refused too. The control: with `ReplicaAck::Off` the lock is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_refuses_after_the_timeout_and_frees_the_name() {
    let (master, _link, replica) = master_and_replica().await;
    let locks = default_client(&master);
    let mut conn = master.conn().await;
    locks.lock("warm").await.unwrap().release().await.unwrap();
    replica.pause();
    for attempt in 0..2 {
        let started = Instant::now();
        let refused = locks.lock("frozen").wait(Duration::ZERO).await.unwrap_err();
        let took = started.elapsed();
        println!("replicas: refused after {took:?} (attempt {attempt}): {refused}");
        assert!(
            matches!(
                refused,
                lock_core::LockError::NotReplicated {
                    acked: 0,
                    required: 1,
                    ..
                }
            ),
            "{refused:?}"
        );
        assert!(
            took >= ReplicaAck::DEFAULT_TIMEOUT,
            "refused after {took:?}"
        );
        assert!(took < ReplicaAck::DEFAULT_TIMEOUT + GENEROUS, "{took:?}");
        assert!(!exists(&mut conn, &lock_key("frozen")).await, "left held");
    }
    let off = builder(&master.url())
        .replica_ack(ReplicaAck::Off)
        .build()
        .unwrap();
    let granted = off.lock("frozen").try_acquire().await.unwrap();
    granted
        .expect("free, and granted without waiting")
        .release()
        .await
        .unwrap();
    replica.resume();
}

/// At connect time, the client waits for the replicas its master lists, and only those: a
/// replica that died (its link gone) is not waited for — the acquisition is granted without
/// a `WAIT`. The control is the test above: a frozen replica, still listed, is waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_the_master_no_longer_lists_is_not_waited_for() {
    let (master, _link, mut replica) = master_and_replica().await;
    let mut conn = master.conn().await;
    replica.kill();
    wait_until("the master dropped its replica", GENEROUS, || {
        let mut conn = conn.clone();
        async move { info_field(&mut conn, "replication", "connected_slaves").await == 0 }
    })
    .await;
    let locks = default_client(&master);
    reset_stats(&mut conn).await;
    let started = Instant::now();
    let guard = locks
        .lock("alone")
        .await
        .expect("granted without a replica");
    let took = started.elapsed();
    guard.release().await.unwrap();
    let (calls, stats) = command_calls(&mut conn).await;
    // The probe's `WAIT 0 0` is the one `WAIT`: none after the acquisition.
    assert_eq!(calls.get("wait").copied(), Some(1), "{stats}");
    assert!(took < ReplicaAck::DEFAULT_TIMEOUT, "{took:?}");
}

/// What the client learned is learned again after its connection was lost: a replica that
/// joined a master after the client first asked is waited for once the client reconnected
/// (on a machine slow enough that 5 s passed, the background question teaches it too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_are_learned_again_after_a_reconnection() {
    let master = RedisServer::start();
    let mut conn = master.conn().await;
    let locks = default_client(&master);
    locks.lock("warm").await.unwrap().release().await.unwrap();
    let _replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
        .start();
    wait_until("the replica is online", GENEROUS, || {
        online_replicas(&master)
    })
    .await;
    reset_stats(&mut conn).await;
    locks.lock("before").await.unwrap().release().await.unwrap();
    let (calls, stats) = command_calls(&mut conn).await;
    // No TOUCH: what was learned at connect time serves (a background question this
    // acquisition may start does not hold it up).
    assert_eq!(
        calls.get("fcall"),
        Some(&2),
        "learned at connect time: {stats}"
    );
    // Every client connection but this one.
    let _: u64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
        .query_async(&mut conn)
        .await
        .unwrap();
    wait_until("an acquisition waited for the replica", GENEROUS, || {
        let (locks, mut conn) = (locks.clone(), conn.clone());
        async move {
            reset_stats(&mut conn).await;
            if let Ok(guard) = locks.lock("after").await {
                guard.release().await.unwrap();
            }
            let (calls, _) = command_calls(&mut conn).await;
            calls.get("wait").copied().unwrap_or(0) >= 2
        }
    })
    .await;
}

/// A replica that joins a master after the client asked is learned again in the background
/// while acquisitions run (every 5 s), without a reconnection: acquisitions then wait for
/// it. Before that, they do not (the first check below): the question is not asked on each
/// acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_joins_later_is_waited_for_within_the_refresh() {
    let master = RedisServer::start();
    let mut conn = master.conn().await;
    let locks = default_client(&master);
    locks.lock("warm").await.unwrap().release().await.unwrap();
    let _replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
        .start();
    wait_until("the replica is online", GENEROUS, || {
        online_replicas(&master)
    })
    .await;
    reset_stats(&mut conn).await;
    locks.lock("before").await.unwrap().release().await.unwrap();
    let (calls, stats) = command_calls(&mut conn).await;
    // No TOUCH: not asked on the acquisition's path (a background question it may start
    // does not hold it up).
    assert_eq!(
        calls.get("fcall"),
        Some(&2),
        "not asked per acquisition: {stats}"
    );
    let started = Instant::now();
    wait_until(
        "an acquisition waited for the replica",
        Duration::from_secs(5) + GENEROUS,
        || {
            let (locks, mut conn) = (locks.clone(), conn.clone());
            async move {
                reset_stats(&mut conn).await;
                if let Ok(guard) = locks.lock("after").await {
                    guard.release().await.unwrap();
                }
                let (calls, _) = command_calls(&mut conn).await;
                // Acquire, the acknowledgement's TOUCH, release (the background question's
                // `WAIT 0 0` is no function call).
                calls.get("fcall").copied().unwrap_or(0) >= 3
            }
        },
    )
    .await;
    println!(
        "replicas: a joining replica was waited for {:?} after it was online",
        started.elapsed()
    );
}
