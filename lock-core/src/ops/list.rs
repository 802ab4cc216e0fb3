//! Finding lock keys with SCAN: on one server, on every master of a Cluster, or on every
//! Redlock node.

use std::time::Duration;

use redis::Cmd;

use crate::error::{bounded, LockError};
use crate::lock::engine::Engine;
use crate::protocol::name::LockName;
use crate::transport::backend::Conn;

/// Keys asked for per SCAN call.
const SCAN_COUNT: usize = 1000;

/// The types of Redis keys that can be locks: hashes (locks and read-write locks) and ZSETs
/// (semaphores). SCAN filters by one type per pass.
const LOCK_TYPES: [&str; 2] = ["hash", "zset"];

/// Every key matching the glob `pattern` that can be a lock, on every master or node of
/// `client`. Each SCAN call is bounded by the command timeout.
pub(crate) async fn scan_keys(client: &Engine, pattern: &[u8]) -> Result<Vec<Vec<u8>>, LockError> {
    let what = LockName::from(pattern);
    client.refuse_if_down(&what)?;
    let timeout = client.config.command_timeout;
    let mut keys = Vec::new();
    // Redlock: a lock lives on a majority, so every node is scanned; a minority that
    // does not answer is skipped (a lock held by a quorum is on a node that answered).
    let mut failures = Vec::new();
    for conn in &client.nodes {
        for kind in LOCK_TYPES {
            let scanned = scan_node(conn.clone(), &what, timeout, (pattern, kind), &mut keys);
            if let Err(error) = scanned.await {
                failures.push(error);
                break;
            }
        }
    }
    if failures.len() > client.nodes.len() - client.quorum() {
        return Err(failures.swap_remove(0));
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// Appends the keys of type `kind` matching `pattern` on one connection: its server, or
/// every master of a Cluster.
async fn scan_node(
    mut conn: Conn,
    what: &LockName,
    timeout: Duration,
    pattern: (&[u8], &str),
    keys: &mut Vec<Vec<u8>>,
) -> Result<(), LockError> {
    #[cfg(feature = "cluster")]
    if let Some(lazy) = conn.as_cluster() {
        return scan_cluster(lazy, what, timeout, pattern, keys).await;
    }
    // One server (also behind Sentinels, or one Redlock node).
    let mut cursor = 0u64;
    loop {
        let cmd = scan(cursor, pattern);
        cursor = page(
            bounded(what, timeout, cmd.query_async(&mut conn)).await?,
            keys,
        );
        if cursor == 0 {
            return Ok(());
        }
    }
}

/// Appends the keys matching `pattern` on every master of a Cluster.
#[cfg(feature = "cluster")]
async fn scan_cluster(
    lazy: &crate::transport::backend::LazyCluster,
    what: &LockName,
    timeout: Duration,
    pattern: (&[u8], &str),
    keys: &mut Vec<Vec<u8>>,
) -> Result<(), LockError> {
    use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

    let mut conn = bounded(what, timeout, lazy.get()).await?;
    let slots = conn.route_command(
        redis::cmd("CLUSTER").arg("SLOTS").clone(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    );
    let slots = async { master_slots(slots.await?) };
    for slot in bounded(what, timeout, slots).await? {
        let mut cursor = 0u64;
        loop {
            let master = Route::new(slot, SlotAddr::Master);
            let node = SingleNodeRoutingInfo::SpecificNode(master);
            let call = conn.route_command(scan(cursor, pattern), RoutingInfo::SingleNode(node));
            let call = async { Ok::<_, redis::RedisError>(redis::from_redis_value(call.await?)?) };
            cursor = page(bounded(what, timeout, call).await?, keys);
            if cursor == 0 {
                break;
            }
        }
    }
    Ok(())
}

/// One SCAN call for keys matching `pattern` of type `kind`.
fn scan(cursor: u64, (pattern, kind): (&[u8], &str)) -> Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT)
        .arg("TYPE")
        .arg(kind);
    cmd
}

/// Adds one SCAN page's keys to `keys` and answers the next cursor (Redis answers are
/// checked by their type: a cursor that is no number is an error of the call).
fn page((cursor, found): (u64, Vec<Vec<u8>>), keys: &mut Vec<Vec<u8>>) -> u64 {
    keys.extend(found);
    cursor
}

/// One slot of each master in a `CLUSTER SLOTS` answer: SCAN is routed by slot, so no
/// node address is needed (a node may announce none).
#[cfg(feature = "cluster")]
fn master_slots(slots: redis::Value) -> redis::RedisResult<Vec<u16>> {
    Ok(cluster_masters(slots)?
        .into_iter()
        .map(|m| m.slot)
        .collect())
}

/// One master of a Cluster, as `CLUSTER SLOTS` names it.
#[cfg(feature = "cluster")]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ClusterMaster {
    /// One slot it serves: commands reach it routed by slot.
    pub(crate) slot: u16,
    /// For an operator: the `host:port` it announces, else its node id.
    pub(crate) label: String,
}

/// Each master of a `CLUSTER SLOTS` answer once, in the order of its first range. Masters
/// are told apart by node id (Redis 4+), else by the endpoint they announce.
#[cfg(feature = "cluster")]
pub(crate) fn cluster_masters(slots: redis::Value) -> redis::RedisResult<Vec<ClusterMaster>> {
    use redis::Value;

    let ranges: Vec<Vec<Value>> = redis::from_redis_value(slots)?;
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for range in ranges {
        let mut range = range.into_iter();
        let start: u16 = redis::from_redis_value(range.next().unwrap_or(Value::Nil))?;
        let node: Vec<Value> = redis::from_redis_value(range.nth(1).unwrap_or(Value::Nil))?;
        let id = match node.get(2) {
            Some(id) => redis::from_redis_value::<Vec<u8>>(id.clone())?,
            None => format!("{:?}", &node).into_bytes(),
        };
        if !seen.contains(&id) {
            let host = node.first().cloned().map(redis::from_redis_value::<String>);
            let port = node.get(1).cloned().map(redis::from_redis_value::<u16>);
            let label = match (host, port) {
                (Some(Ok(host)), Some(Ok(port))) if !host.is_empty() => format!("{host}:{port}"),
                _ => String::from_utf8_lossy(&id).into_owned(),
            };
            seen.push(id);
            out.push(ClusterMaster { slot: start, label });
        }
    }
    Ok(out)
}

/// Escapes the glob characters of `raw` for SCAN's MATCH (`*`, `?`, `[`, `]`, `\`).
pub(crate) fn glob_escape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    for &b in raw {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "cluster")]
    #[test]
    fn one_slot_per_master_even_without_endpoints() {
        use redis::Value;

        let node = |host: &str, port: i64, id: &str| {
            Value::Array(vec![
                Value::BulkString(host.into()),
                Value::Int(port),
                Value::BulkString(id.into()),
            ])
        };
        let range = |from: i64, to: i64, master: Value| {
            Value::Array(vec![Value::Int(from), Value::Int(to), master])
        };
        let slots = Value::Array(vec![
            range(0, 99, node("", 6379, "a")),
            range(100, 199, node("", 6379, "b")),
            // A second range of the first master.
            range(200, 16383, node("", 6379, "a")),
        ]);
        assert_eq!(master_slots(slots.clone()).unwrap(), [0, 100]);
        let labels: Vec<String> = (cluster_masters(slots).unwrap().into_iter())
            .map(|m| m.label)
            .collect();
        assert_eq!(labels, ["a", "b"], "no endpoint: named by node id");
        let announced = Value::Array(vec![range(0, 16383, node("10.0.0.1", 7000, "a"))]);
        assert_eq!(
            cluster_masters(announced).unwrap()[0].label,
            "10.0.0.1:7000"
        );
        assert!(
            master_slots(Value::Int(1)).is_err(),
            "an unreadable answer is an error"
        );
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape(b"a*b?[c]\\"), b"a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape(b"plain:"), b"plain:");
    }
}
