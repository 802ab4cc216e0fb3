//! Cluster faults: which nodes serve a key, and failovers (planned, or forced after a kill).

use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::{RedisCluster, RedisServer};

/// Pause between polls of cluster state, which has no event to wait on.
const POLL: Duration = Duration::from_millis(20);
/// Redis abandons a manual failover that has not completed after this long.
const MANUAL_FAILOVER_TIMEOUT: Duration = Duration::from_secs(6);

/// The master serving `key` and its replicas, as node indices of `cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The key's slot.
    pub slot: u16,
    /// The node that serves the slot.
    pub master: usize,
    /// Its replicas that the cluster lists (a replica is listed once it has synced).
    pub replicas: Vec<usize>,
}

/// Finds the shard of `key`, as the first running master sees the slot map, waiting up to
/// `bound` until the shard lists at least one replica.
///
/// # Panics
/// When no running node answers, or no replica is listed in time.
pub async fn shard_of(cluster: &RedisCluster, key: &str, bound: Duration) -> Shard {
    let deadline = Instant::now() + bound;
    loop {
        let masters = cluster.master_indices();
        let node = &cluster.nodes()[*masters.first().expect("a running master")];
        let mut conn = node.conn().await;
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("CLUSTER KEYSLOT");
        let ports = slot_nodes(&mut conn, slot).await;
        let index = |port: u16| cluster.nodes().iter().position(|n| n.port() == port);
        if let Some((&master, replicas)) = ports.split_first() {
            let replicas: Vec<usize> = replicas.iter().filter_map(|&p| index(p)).collect();
            if let (Some(master), false) = (index(master), replicas.is_empty()) {
                let shard = Shard {
                    slot,
                    master,
                    replicas,
                };
                // This node's slot map may lag behind a failover: trust it once the nodes agree.
                if is_master_with_replica(cluster, &shard).await {
                    return shard;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no master with a replica listed for slot {slot} of {key} within {bound:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The ports serving `slot` in this node's view: master first, then replicas.
async fn slot_nodes(conn: &mut redis::aio::MultiplexedConnection, slot: u16) -> Vec<u16> {
    let slots: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .expect("CLUSTER SLOTS");
    let range = slots.iter().find(|range| {
        let bound = |v: &Value| redis::from_redis_value_ref::<u16>(v).unwrap_or(0);
        (bound(&range[0])..=bound(&range[1])).contains(&slot)
    });
    range
        .into_iter()
        .flat_map(|range| &range[2..])
        .filter_map(|node| {
            let node: Vec<Value> = redis::from_redis_value_ref(node).ok()?;
            redis::from_redis_value_ref(node.get(1)?).ok()
        })
        .collect()
}

/// True when the shard's master says it is a master with the shard's first replica
/// attached and in sync, and every running node routes the slot to that master (a client
/// that loads its slot map from any seed then sends keyless commands like `WAIT` there).
async fn is_master_with_replica(cluster: &RedisCluster, shard: &Shard) -> bool {
    let (master, replica) = (
        &cluster.nodes()[shard.master],
        &cluster.nodes()[shard.replicas[0]],
    );
    if !master.is_running() || !replica.is_running() {
        return false;
    }
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut master.conn().await)
        .await
        .expect("INFO replication");
    let attached = format!("port={},state=online", replica.port());
    if !(info.contains("role:master") && info.lines().any(|l| l.contains(&attached))) {
        return false;
    }
    // The master's cluster view must list the replica too, or it ignores the replica's
    // request for a planned failover (which then times out after 5 s of paused writes).
    let mut conn = master.conn().await;
    let id: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query_async(&mut conn)
        .await
        .expect("CLUSTER MYID");
    let replicas: Vec<String> = redis::cmd("CLUSTER")
        .arg("REPLICAS")
        .arg(&id)
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    let listed = format!(":{}@", replica.port());
    if !replicas.iter().any(|r| r.contains(&listed)) {
        return false;
    }
    for node in cluster.nodes().iter().filter(|n| n.is_running()) {
        let ports = slot_nodes(&mut node.conn().await, shard.slot).await;
        if ports.first() != Some(&master.port()) {
            return false;
        }
    }
    true
}

/// The node's role (`master` or `slave`) from `ROLE`.
pub async fn role(node: &RedisServer) -> String {
    let mut conn = node.conn().await;
    let role: Vec<Value> = redis::cmd("ROLE")
        .query_async(&mut conn)
        .await
        .expect("ROLE");
    redis::from_redis_value_ref(&role[0]).expect("ROLE names the role first")
}

/// Sends `CLUSTER FAILOVER` (with `option`: `FORCE` or `TAKEOVER`) to the replica `node`,
/// then waits up to `bound` until it reports itself master. A planned failover that times
/// out (its master had not yet learned, by gossip, that this node is its replica) is asked
/// again.
///
/// # Panics
/// When the command fails or the node is not master in time.
pub async fn failover(node: &RedisServer, option: Option<&str>, bound: Duration) {
    let deadline = Instant::now() + bound;
    loop {
        if role(node).await == "master" {
            return;
        }
        let mut conn = node.conn().await;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        if let Some(option) = option {
            cmd.arg(option);
        }
        let () = cmd
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("CLUSTER FAILOVER {option:?} on {}: {e}", node.port()));
        // Redis gives a manual failover 5 s; ask again after that.
        let retry_at = Instant::now() + MANUAL_FAILOVER_TIMEOUT;
        while Instant::now() < retry_at.min(deadline) {
            if role(node).await == "master" {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        assert!(
            Instant::now() < deadline,
            "node {} not master {bound:?} after CLUSTER FAILOVER {option:?}; its log:\n{}",
            node.port(),
            node.log()
        );
    }
}
