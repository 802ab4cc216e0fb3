//! Cluster resharding: one slot moved to another master the way `redis-cli --cluster
//! reshard` moves it — `CLUSTER SETSLOT <slot> IMPORTING <source id>` on the target,
//! `MIGRATING <target id>` on the source, the slot's keys moved with `CLUSTER
//! GETKEYSINSLOT` and `MIGRATE … KEYS …` in batches, then `SETSLOT <slot> NODE <target id>`
//! on the target, the source and every other master.
//!
//! Between [`Migration::begin`] and [`Migration::finish`] the slot is mid-migration: a
//! command whose keys are all gone from the source is answered `ASK` (the client retries on
//! the target with `ASKING`), and one whose keys are split between the two nodes, or absent
//! on the target, `TRYAGAIN`. Each step is a separate call so that callers can pace it.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue};

use crate::{RedisCluster, RedisServer};

/// Bound on every command and connection (a `MIGRATE` waits for the target too).
const BOUND: Duration = Duration::from_secs(10);
/// `MIGRATE`'s own timeout for the target's answer, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// A slot being moved from one master to another (node indices of the cluster).
#[derive(Debug)]
pub struct Migration {
    /// The slot.
    pub slot: u16,
    /// The master that owned it.
    pub source: usize,
    /// The master it moves to.
    pub target: usize,
    source_id: String,
    target_id: String,
    source_conn: MultiplexedConnection,
    target_port: u16,
}

impl Migration {
    /// Marks `slot` importing on `target` and migrating on its owner; no key moves yet.
    ///
    /// # Errors
    /// When a node does not answer or refuses (e.g. `target` already owns the slot).
    pub async fn begin(cluster: &RedisCluster, slot: u16, target: usize) -> Result<Self, String> {
        let source = owner(cluster, slot).await?;
        if source == target {
            return Err(format!("slot {slot} is already on node {target}"));
        }
        let nodes = cluster.nodes();
        let mut source_conn = connect(&nodes[source]).await?;
        let mut target_conn = connect(&nodes[target]).await?;
        let source_id = my_id(&mut source_conn).await?;
        let target_id = my_id(&mut target_conn).await?;
        let setslot = |state: &str, id: &str| {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .to_owned()
        };
        query::<()>(&mut target_conn, &setslot("IMPORTING", &source_id)).await?;
        query::<()>(&mut source_conn, &setslot("MIGRATING", &target_id)).await?;
        Ok(Self {
            slot,
            source,
            target,
            source_id,
            target_id,
            source_conn,
            target_port: nodes[target].port(),
        })
    }

    /// Moves up to `batch` of the slot's keys still on the source with one `MIGRATE`;
    /// returns how many it asked for (0: none left).
    ///
    /// # Errors
    /// When the source does not answer or `MIGRATE` fails (the keys stay on the source).
    pub async fn step(&mut self, batch: usize) -> Result<usize, String> {
        let keys: Vec<Vec<u8>> = query(
            &mut self.source_conn,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(batch.max(1)),
        )
        .await?;
        if keys.is_empty() {
            return Ok(0);
        }
        self.migrate(&keys).await?;
        Ok(keys.len())
    }

    /// Moves `keys` (of the slot) with one `MIGRATE`, whichever `GETKEYSINSLOT` would list
    /// first: for a test that needs a given split.
    ///
    /// # Errors
    /// When the source does not answer or `MIGRATE` fails.
    pub async fn migrate(&mut self, keys: &[Vec<u8>]) -> Result<(), String> {
        let mut migrate = redis::cmd("MIGRATE");
        migrate
            .arg("127.0.0.1")
            .arg(self.target_port)
            .arg("")
            .arg(0)
            .arg(MIGRATE_TIMEOUT_MS)
            .arg("KEYS")
            .arg(keys);
        // "OK", or "NOKEY" when every key expired meanwhile.
        query::<String>(&mut self.source_conn, &migrate).await?;
        Ok(())
    }

    /// Moves every key left, `batch` at a time, at most `max_steps` steps.
    ///
    /// # Errors
    /// As [`Self::step`], or when keys are still left after `max_steps`.
    pub async fn drain(&mut self, batch: usize, max_steps: usize) -> Result<(), String> {
        for _ in 0..max_steps {
            if self.step(batch).await? == 0 {
                return Ok(());
            }
        }
        Err(format!(
            "slot {}: keys left after {max_steps} steps",
            self.slot
        ))
    }

    /// Gives the slot to the target: `SETSLOT NODE` on the target, then the source, then
    /// every other master (the replicas learn it by gossip). Call once no key is left.
    ///
    /// # Errors
    /// When the target or the source refuses; the other masters' answers are not needed
    /// (they learn the owner by gossip too).
    pub async fn finish(self, cluster: &RedisCluster) -> Result<(), String> {
        let nodes = cluster.nodes();
        let setslot = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(self.slot)
            .arg("NODE")
            .arg(&self.target_id)
            .to_owned();
        query::<()>(&mut connect(&nodes[self.target]).await?, &setslot).await?;
        let mut source_conn = self.source_conn;
        query::<()>(&mut source_conn, &setslot).await?;
        for other in cluster.master_indices() {
            if other != self.source && other != self.target {
                if let Ok(mut conn) = connect(&nodes[other]).await {
                    let _ = query::<()>(&mut conn, &setslot).await;
                }
            }
        }
        Ok(())
    }

    /// The source's node id (for messages).
    pub fn source_id(&self) -> &str {
        &self.source_id
    }
}

/// `CLUSTER KEYSLOT key`, asked of `node`.
///
/// # Errors
/// When the node does not answer.
pub async fn keyslot(node: &RedisServer, key: &[u8]) -> Result<u16, String> {
    query(
        &mut connect(node).await?,
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
    )
    .await
}

/// The master that says it owns `slot` (its own line of `CLUSTER NODES` lists the slot).
///
/// # Errors
/// When no running master claims it.
pub async fn owner(cluster: &RedisCluster, slot: u16) -> Result<usize, String> {
    for i in cluster.master_indices() {
        let Ok(mut conn) = connect(&cluster.nodes()[i]).await else {
            continue;
        };
        let nodes: String = query(&mut conn, redis::cmd("CLUSTER").arg("NODES")).await?;
        let mine = nodes.lines().find(|l| l.contains("myself"));
        if mine.is_some_and(|line| lists_slot(line, slot)) {
            return Ok(i);
        }
    }
    Err(format!("no running master claims slot {slot}"))
}

/// Whether a `CLUSTER NODES` line's slot ranges (`0-5460`, `7`; not the `[…]` migration
/// marks) contain `slot`.
fn lists_slot(line: &str, slot: u16) -> bool {
    line.split(' ').skip(8).any(|range| {
        let mut ends = range.splitn(2, '-').map(str::parse::<u16>);
        match (ends.next(), ends.next()) {
            (Some(Ok(low)), None) => low == slot,
            (Some(Ok(low)), Some(Ok(high))) => (low..=high).contains(&slot),
            _ => false,
        }
    })
}

async fn my_id(conn: &mut MultiplexedConnection) -> Result<String, String> {
    query(conn, redis::cmd("CLUSTER").arg("MYID")).await
}

async fn connect(node: &RedisServer) -> Result<MultiplexedConnection, String> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(BOUND))
        .set_response_timeout(Some(BOUND));
    node.client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| format!("node {}: {e}", node.port()))
}

async fn query<T: FromRedisValue>(
    conn: &mut MultiplexedConnection,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    cmd.query_async(conn)
        .await
        .map_err(|e| format!("{e} (to {cmd:?})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ranges_are_read_from_a_nodes_line() {
        let line = "abc 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 10-5460 7000 \
                    [5461->-def]";
        assert!(lists_slot(line, 10) && lists_slot(line, 5460) && lists_slot(line, 7000));
        assert!(!lists_slot(line, 9) && !lists_slot(line, 5461) && !lists_slot(line, 6999));
        // The config epoch (field 7) is no slot.
        assert!(!lists_slot(line, 1));
    }
}
