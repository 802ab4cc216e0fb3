//! Fault suite, Redis Cluster failovers: a planned failover keeps the lock; a master that
//! dies before its replica has the lock grants it twice, unless the acquisition waited for
//! the replica — which it does by default (`ReplicaAck::Auto`), and not with
//! `ReplicaAck::Off`.

use std::time::Duration;

use distlock_tests::fault::cluster::{failover, shard_of};
use distlock_tests::locks::{lock_key, GENEROUS};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockError, LockGuard, ReplicaAck};
use redis::aio::MultiplexedConnection;
use tokio::task::block_in_place;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(2);
const TRIALS: usize = 20;
/// Cluster health (after a node restart) and slot-map changes.
const SETTLE: Duration = Duration::from_secs(30);

/// One cluster at a time: two 6-node clusters failing over at once on a 2-core machine make
/// failovers slow enough to outlast leases.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A client with `ack` (`None`: the default).
fn client(cluster: &RedisCluster, ack: Option<ReplicaAck>) -> LockClient {
    let builder = LockClient::cluster(cluster.seed_urls())
        .lease(LEASE)
        .command_timeout(Duration::from_secs(2));
    match ack {
        Some(ack) => builder.replica_ack(ack),
        None => builder,
    }
    .build()
    .unwrap()
}

/// Tries once, retrying errors while the cluster settles; `None` when the lock is busy.
async fn try_lock(locks: &LockClient, name: &str) -> Option<LockGuard> {
    let deadline = Instant::now() + GENEROUS;
    loop {
        match locks.lock(name).try_acquire().await {
            Ok(guard) => return guard,
            Err(e) if e.is_unavailable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Three planned `CLUSTER FAILOVER`s of the master serving the lock, back to back, while a
/// client holds it with the watchdog's default 30 s lease: after each, another client finds
/// it busy, and the holder's renewal (an `extend`) reaches the new master and finds its hold.
/// The holder's release succeeds on the last master.
///
/// Back-to-back failovers hit a Redis 7.0 bug (fixed in Valkey 8.1, valkey-io/valkey#1711):
/// a replica asked to fail over again within 4 × `cluster-node-timeout` of an election it
/// won claims the slots with its stale votes and epoch, loses the epoch conflict at once, and
/// leaves its master's writes paused until the manual failover times out (5 s). Renewals
/// wait that long, so a lease must outlast it; with a 6 s lease this test lost the lock in
/// about one run of ten (see SAFETY.md). The default lease does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_failovers_keep_the_lock() {
    let _one = ONE_CLUSTER.lock().await;
    let cluster = RedisCluster::start(3, 1);
    let holder = LockClient::cluster(cluster.seed_urls())
        .command_timeout(Duration::from_secs(2))
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(2),
        })
        .build()
        .unwrap();
    let other = client(&cluster, Some(ReplicaAck::Off));
    let guard = holder.lock("planned").await.unwrap();
    let mut renewed_after = Vec::new();
    for round in 0..3 {
        let shard = shard_of(&cluster, &lock_key("planned"), SETTLE).await;
        failover(&cluster.nodes()[shard.replicas[0]], None, SETTLE).await;
        let failed_over = Instant::now();
        assert!(
            try_lock(&other, "planned").await.is_none(),
            "round {round}: granted to another client after a planned failover"
        );
        renewed_after.push(extend_through_failover(&guard, round).await - failed_over);
        assert!(guard.is_held(), "round {round}: the holder lost the lock");
        block_in_place(|| cluster.wait_until_healthy(SETTLE)).unwrap();
    }
    eprintln!("planned failovers: renewal confirmed {renewed_after:?} after each failover");
    guard.release().await.expect("released on the last master");
}

/// Renews `guard` until a renewal is confirmed, retrying while the cluster settles; returns
/// when it was confirmed. A renewal that finds the lock gone fails the test.
async fn extend_through_failover(guard: &LockGuard, round: usize) -> Instant {
    let deadline = Instant::now() + SETTLE;
    loop {
        match guard.extend(Duration::from_secs(30)).await {
            Ok(()) => return Instant::now(),
            Err(e) if e.is_unavailable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("round {round}: renewal after a planned failover: {e}"),
        }
    }
}

/// Lets a master start a full sync at once instead of after the default 5 s (which would
/// make every rejoin of a killed master take 5 s).
async fn sync_without_delay(node: &RedisServer) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query_async(&mut node.conn().await)
        .await
        .unwrap();
}

/// One kill trial's outcome.
#[derive(Debug, PartialEq, Eq)]
enum Kill {
    /// A was refused (`NotReplicated`): no hold, nothing to grant twice.
    Refused,
    /// A was refused although its replica was online: safe, reported.
    RefusedInSync,
    /// A held it; after the failover B found it busy.
    Kept,
    /// A held it; B got it after A's `lost()` had fired.
    GrantedAfterLoss,
    /// A held it and still believed so when B got it: a double grant.
    DoubleGrant,
}

/// Freezes the replica, then has its master drop the replication link, so nothing written
/// from now on reaches the replica: frozen, it cannot reconnect. In this order nothing races
/// (cutting the link from the replica's side first let a busy machine's replica reconnect
/// before it froze, every try).
async fn stall_replication(cluster: &RedisCluster, master: usize, replica: usize) {
    block_in_place(|| cluster.nodes()[replica].pause());
    let mut master_conn = cluster.nodes()[master].conn().await;
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut master_conn)
        .await
        .unwrap();
    let deadline = Instant::now() + GENEROUS;
    while connected_replicas(&mut master_conn).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the master still lists its frozen replica {GENEROUS:?} after CLIENT KILL"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn connected_replicas(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO replication lists connected_slaves")
}

/// Waits until every running node's `CLUSTER SLOTS` lists a replica for every slot range:
/// what a client at default settings reads to learn which shards have replicas, from any
/// node. (The Cluster lists a replica once it knows that the replica synced: a restarted
/// master that rejoined as a replica, or a new cluster's replica, not at once.)
async fn replicas_listed_everywhere(cluster: &RedisCluster) {
    let deadline = Instant::now() + SETTLE;
    for node in cluster.nodes().iter().filter(|node| node.is_running()) {
        let mut conn = node.conn().await;
        loop {
            let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut conn)
                .await
                .unwrap();
            // Each entry: first and last slot, the master, then its replicas.
            if !slots.is_empty() && slots.iter().all(|entry| entry.len() > 3) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} lists no replica for some slots after {SETTLE:?}: {slots:?}",
                node.port()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One trial: the lock's master is SIGKILLed right after A's acquisition and its replica
/// takes over (`CLUSTER FAILOVER TAKEOVER`, which skips the 2 s failure detection; the
/// automatic failover would promote the same replica with the same data); then B asks.
/// `stall`: the replica got nothing since before the acquisition. A runs with the default
/// settings (`acked`) or with `ReplicaAck::Off`; B with `Off`: it only asks the promoted
/// replica, and a wait of its own would only delay the question.
async fn kill_trial(cluster: &mut RedisCluster, i: usize, acked: bool, stall: bool) -> Kill {
    block_in_place(|| cluster.wait_until_healthy(SETTLE)).unwrap();
    let name = format!("killed_{}_{i}", if acked { "default" } else { "off" });
    let shard = shard_of(cluster, &lock_key(&name), SETTLE).await;
    let replica = shard.replicas[0];
    replicas_listed_everywhere(cluster).await;
    // Connected before any node freezes (a new cluster client connects to every node), and
    // A learned the shards' replicas then, at its first acquisition.
    let a_ack = (!acked).then_some(ReplicaAck::Off);
    let (a, b) = (
        client(cluster, a_ack),
        client(cluster, Some(ReplicaAck::Off)),
    );
    for locks in [&a, &b] {
        // Any answer will do (a refusal for lack of replicas too): only the connections count.
        if let Ok(Some(guard)) = locks.lock(format!("warm_{i}")).try_acquire().await {
            guard.release().await.unwrap();
        }
    }
    if stall {
        stall_replication(cluster, shard.master, replica).await;
    }
    let acquired = a.lock(name.as_str()).wait(Duration::from_secs(2)).await;
    let evidence: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut cluster.nodes()[shard.master].conn().await)
        .await
        .unwrap();
    block_in_place(|| cluster.nodes_mut()[shard.master].kill());
    if stall {
        cluster.nodes()[replica].resume();
    }
    failover(&cluster.nodes()[replica], Some("TAKEOVER"), SETTLE).await;
    let outcome = match acquired {
        Err(LockError::NotReplicated { .. }) if stall => {
            assert!(acked, "trial {i}: refused with ReplicaAck::Off");
            Kill::Refused
        }
        Err(e @ LockError::NotReplicated { .. }) => {
            // A false refusal: safe, but unexpected with the replica online. Keep the evidence.
            println!("trial {i}: refused with the replica online: {e}\n{evidence}");
            Kill::RefusedInSync
        }
        Err(e) => panic!("trial {i}: A: {e}"),
        Ok(guard_a) => {
            let outcome = match try_lock(&b, &name).await {
                None => Kill::Kept,
                Some(guard_b) => {
                    let outcome = if guard_a.is_held() {
                        Kill::DoubleGrant
                    } else {
                        Kill::GrantedAfterLoss
                    };
                    drop(guard_b);
                    outcome
                }
            };
            drop(guard_a);
            outcome
        }
    };
    // The old master comes back empty and rejoins as a replica of the new one.
    block_in_place(|| cluster.nodes_mut()[shard.master].restart());
    sync_without_delay(&cluster.nodes()[shard.master]).await;
    outcome
}

/// 20 trials at default settings (`ReplicaAck::Auto`: one replica within 1 s, since the
/// shard has one), the master killed right after the acquisition: half with the replica cut
/// off first (A is refused with `NotReplicated`), half with it healthy (the lock survives on
/// the promoted replica and B finds it busy; a refusal there is reported with the master's
/// replication info). 0 double grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_killed_with_an_unreplicated_lock_at_default_settings() {
    let (acked, took) = kill_trials(true).await;
    let count = |k: Kill| acked.iter().filter(|&o| *o == k).count();
    println!(
        "faults::cluster: master killed, default settings ({took:?} for {TRIALS} trials): double \
         grants {}/{TRIALS} (refused {}, kept {}, refused with the replica online {}, granted \
         after loss {})",
        count(Kill::DoubleGrant),
        count(Kill::Refused),
        count(Kill::Kept),
        count(Kill::RefusedInSync),
        count(Kill::GrantedAfterLoss),
    );
    assert_eq!(count(Kill::DoubleGrant), 0, "{acked:?}");
    assert_eq!(count(Kill::Refused), TRIALS / 2, "{acked:?}");
    // With the replica online the lock is kept (or, rarely, refused: see the output).
    assert_eq!(
        count(Kill::Kept) + count(Kill::RefusedInSync),
        TRIALS / 2,
        "{acked:?}"
    );
}

/// The control: 20 trials with `ReplicaAck::Off`, the replica cut off: A is granted a lock
/// that only the dying master had, and B is granted it again on the promoted replica —
/// every time. How often A had not yet noticed (a double grant) is counted and reported:
/// the known limit of asynchronous replication that the Safety page documents, which the
/// default closes in the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_killed_with_an_unreplicated_lock_with_replica_ack_off() {
    let (unacked, took) = kill_trials(false).await;
    let count = |k: Kill| unacked.iter().filter(|&o| *o == k).count();
    println!(
        "faults::cluster: master killed, ReplicaAck::Off ({took:?} for {TRIALS} trials): double \
         grants {}/{TRIALS} (granted after loss {}, kept {})",
        count(Kill::DoubleGrant),
        count(Kill::GrantedAfterLoss),
        count(Kill::Kept),
    );
    // Deterministic: the promoted replica never had the lock, so B always gets it.
    assert_eq!(count(Kill::Kept), 0, "{unacked:?}");
    // And the known limit is reproduced, not just possible: A still believed it held the
    // lock when B got it (19–20 of 20 in every recorded run).
    assert!(
        count(Kill::DoubleGrant) > 0,
        "no double grant with ReplicaAck::Off: {unacked:?}"
    );
}

/// [`TRIALS`] kill trials on a cluster of their own (A at default settings, `acked`: every
/// other one with the replica healthy; with `ReplicaAck::Off`: the replica always cut off),
/// and how long they took. The two sets run as two tests, side by side under nextest.
async fn kill_trials(acked: bool) -> (Vec<Kill>, Duration) {
    let _one = ONE_CLUSTER.lock().await;
    let mut cluster = RedisCluster::start(3, 1);
    for node in cluster.nodes() {
        sync_without_delay(node).await;
    }
    let started = Instant::now();
    let mut outcomes = Vec::with_capacity(TRIALS);
    for i in 0..TRIALS {
        let stall = !acked || i % 2 == 0;
        outcomes.push(kill_trial(&mut cluster, i, acked, stall).await);
    }
    (outcomes, started.elapsed())
}
