//! Finding lock keys with SCAN: on one server, on every master of a Cluster, or on every
//! Redlock node.

use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Value};

use crate::backend::Conn;
use crate::client::ClientInner;
use crate::error::{bounded, LockError};
use crate::name::LockName;

/// Keys asked for per SCAN call.
const SCAN_COUNT: usize = 1000;

impl ClientInner {
    /// Every hash key matching the glob `pattern`, on every master or node. Each SCAN call is
    /// bounded by the command timeout.
    pub(crate) async fn scan_keys(&self, pattern: &[u8]) -> Result<Vec<Vec<u8>>, LockError> {
        let what = LockName::from(pattern);
        let timeout = self.config.command_timeout;
        let mut keys = Vec::new();
        // Redlock: a lock lives on a majority, so every node is scanned; a minority that
        // does not answer is skipped (a lock held by a quorum is on a node that answered).
        let mut failures = Vec::new();
        for conn in &self.nodes {
            if let Err(error) = scan_node(conn.clone(), &what, timeout, pattern, &mut keys).await {
                failures.push(error);
            }
        }
        if failures.len() > self.nodes.len() - self.quorum() {
            return Err(failures.swap_remove(0));
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

/// Appends the keys matching `pattern` on one connection: its server, or every master of a
/// Cluster.
async fn scan_node(
    mut conn: Conn,
    what: &LockName,
    timeout: Duration,
    pattern: &[u8],
    keys: &mut Vec<Vec<u8>>,
) -> Result<(), LockError> {
    match conn.clone() {
        // One server (also behind Sentinels, or one Redlock node).
        Conn::Single(_) | Conn::Sentinel(_) => {
            let mut cursor = 0u64;
            loop {
                let cmd = scan(cursor, pattern);
                cursor = page(
                    bounded(what, timeout, cmd.query_async(&mut conn)).await?,
                    keys,
                );
                if cursor == 0 {
                    break;
                }
            }
        }
        Conn::Cluster(lazy) => {
            let mut conn: ClusterConnection = bounded(what, timeout, lazy.get()).await?;
            let slots = conn.route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            );
            for (host, port) in masters(bounded(what, timeout, slots).await?) {
                let mut cursor = 0u64;
                loop {
                    let node = SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    };
                    let call =
                        conn.route_command(scan(cursor, pattern), RoutingInfo::SingleNode(node));
                    let call = async { Ok(redis::from_redis_value(call.await?)?) };
                    cursor = page(bounded(what, timeout, call).await?, keys);
                    if cursor == 0 {
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn scan(cursor: u64, pattern: &[u8]) -> Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT)
        .arg("TYPE")
        .arg("hash");
    cmd
}

/// Adds one SCAN page's keys to `keys` and answers the next cursor (Redis answers are
/// checked by their type: a cursor that is no number is an error of the call).
fn page((cursor, found): (u64, Vec<Vec<u8>>), keys: &mut Vec<Vec<u8>>) -> u64 {
    keys.extend(found);
    cursor
}

/// The distinct master addresses of a `CLUSTER SLOTS` answer.
fn masters(slots: Value) -> Vec<(String, u16)> {
    let ranges: Vec<Vec<Value>> = redis::from_redis_value(slots).unwrap_or_default();
    let mut out: Vec<(String, u16)> = ranges
        .into_iter()
        .filter_map(|range| {
            let node: Vec<Value> = redis::from_redis_value(range.into_iter().nth(2)?).ok()?;
            let mut node = node.into_iter();
            let host: String = redis::from_redis_value(node.next()?).ok()?;
            let port: u16 = redis::from_redis_value(node.next()?).ok()?;
            Some((host, port))
        })
        .collect();
    out.sort();
    out.dedup();
    out
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

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape(b"a*b?[c]\\"), b"a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape(b"plain:"), b"plain:");
    }
}
