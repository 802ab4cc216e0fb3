//! What a client knows of the replicas of the masters it writes to, for the replica
//! acknowledgement default ([`ReplicaAck::Auto`](crate::ReplicaAck::Auto)): learned when it
//! connects and again when its topology may have changed, never per acquisition.
//!
//! The question goes where the answer is exact and the application's least-privilege ACL
//! user may ask it:
//! - one server, or the master Sentinels name: `WAIT 0 0` on a connection of its own. `WAIT`
//!   counts the online replicas that acknowledged the last write *of the connection it runs
//!   on* (on a connection that just wrote, a replica a few milliseconds behind is not
//!   counted); a new connection has written nothing, so every online replica counts.
//!   `INFO` would say as much, but the documented ACL rule leaves `@dangerous` out.
//! - a Cluster: `CLUSTER SLOTS`, which the cluster client reads anyway: per slot range, its
//!   master and the replicas the Cluster has not marked failed.
//!
//! What is learned is forgotten when the command connection is lost (it reconnects, maybe
//! elsewhere), when the Sentinels' master changes, and when an acquisition was refused for
//! want of an acknowledgement (the master may have lost its replicas for good): the next
//! acquisition asks again. It is also asked again in the background every [`REFRESH`]
//! while acquisitions use it, as Redisson scans a Cluster's topology: a replica that joins
//! a master after the client asked (one an operator adds, a failed master back as a
//! replica) is listed only once it synced, and the cluster client follows failovers and
//! resharding without the client seeing them. An acquisition never waits for that
//! question; between two of them, a replica that just joined is not waited for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redis::RedisResult;
#[cfg(feature = "cluster")]
use redis::Value;

use crate::error::{bounded, LockError};
use crate::protocol::name::LockName;
use crate::transport::backend::Conn;

/// How long what was learned serves acquisitions before it is asked again (in the
/// background: the acquisition that finds it this old does not wait for the answer).
pub(crate) const REFRESH: Duration = Duration::from_secs(5);

/// How a client asks about replicas, per topology (Redlock: not at all).
pub(crate) enum Probe {
    /// One server: a new connection per question, through the client's own settings
    /// (boxed: a `redis::Client` is large, the other variants small).
    Single(Box<(redis::Client, redis::AsyncConnectionConfig)>),
    /// The master the Sentinels name: a new connection to the one the command connection
    /// goes to.
    #[cfg(feature = "sentinel")]
    Sentinel(crate::transport::sentinel::SentinelConn),
    /// `CLUSTER SLOTS` on the command connection.
    #[cfg(feature = "cluster")]
    Cluster,
}

/// The replicas learned.
#[derive(Debug)]
enum Replicas {
    /// Of the one master: how many are online.
    Master(usize),
    /// Of each Cluster shard, by its slot ranges (sorted): how many the Cluster has not
    /// marked failed.
    #[cfg(feature = "cluster")]
    Shards(Vec<Shard>),
}

/// One slot range of a Cluster and its master's replicas.
#[cfg(feature = "cluster")]
#[derive(Debug, PartialEq, Eq)]
struct Shard {
    first: u16,
    last: u16,
    replicas: usize,
}

impl Replicas {
    /// The replicas of the master serving `key`: a slot no range covers has none known.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    fn serving(&self, key: &[u8]) -> usize {
        match self {
            Self::Master(replicas) => *replicas,
            #[cfg(feature = "cluster")]
            Self::Shards(shards) => {
                let slot = slot_of(key);
                let at = shards.partition_point(|s| s.last < slot);
                shards
                    .get(at)
                    .filter(|s| s.first <= slot)
                    .map_or(0, |s| s.replicas)
            }
        }
    }
}

/// What one client knows of its masters' replicas, and when it learned it.
pub(crate) struct ReplicaView {
    probe: Probe,
    /// The command connection: on a Sentinel client, its count of masters tells a new one.
    conn: Conn,
    learned: Mutex<Option<Learned>>,
    /// Held while asking: acquisitions that find nothing learned share one question.
    asking: tokio::sync::Mutex<()>,
    /// Set while the replicas are asked again in the background.
    refreshing: AtomicBool,
    /// Bound on each question (the command timeout).
    timeout: Duration,
}

struct Learned {
    /// The command connection's [`Conn::epoch`] when this was learned.
    epoch: u64,
    replicas: Replicas,
    /// When it was learned (asked again after [`REFRESH`]).
    at: Instant,
}

impl ReplicaView {
    pub(crate) fn new(probe: Probe, conn: Conn, timeout: Duration) -> Self {
        Self {
            probe,
            conn,
            learned: Mutex::default(),
            asking: tokio::sync::Mutex::const_new(()),
            refreshing: AtomicBool::new(false),
            timeout,
        }
    }

    fn learned(&self) -> MutexGuard<'_, Option<Learned>> {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The replicas of the master serving `key`, if known for the current topology:
    /// without a round trip. Learned [`REFRESH`] ago or more, they are asked again in the
    /// background meanwhile.
    pub(crate) fn known(self: &Arc<Self>, key: &[u8]) -> Option<usize> {
        let epoch = self.conn.epoch();
        let learned = self.learned();
        let learned = learned.as_ref().filter(|l| l.epoch == epoch)?;
        if learned.at.elapsed() >= REFRESH && !self.refreshing.swap(true, Ordering::AcqRel) {
            self.refresh_in_background();
        }
        Some(learned.replicas.serving(key))
    }

    /// The replicas of the master serving `key`: known, or asked now (one question for
    /// every caller that finds it unknown at once).
    ///
    /// # Errors
    /// The question's errors, about `name` ([`LockError::Unavailable`], a refusal of
    /// `WAIT` or `CLUSTER SLOTS` by an ACL): the acquisition cannot know what to wait for.
    pub(crate) async fn learn(
        self: &Arc<Self>,
        name: &LockName,
        key: &[u8],
    ) -> Result<usize, LockError> {
        let _asking = self.asking.lock().await;
        if let Some(replicas) = self.known(key) {
            return Ok(replicas);
        }
        let epoch = self.conn.epoch();
        let replicas = self.ask(name).await?;
        tracing::debug!(?replicas, "learned the masters' replicas");
        let serving = replicas.serving(key);
        self.store(epoch, replicas);
        Ok(serving)
    }

    fn store(&self, epoch: u64, replicas: Replicas) {
        let at = Instant::now();
        *self.learned() = Some(Learned {
            epoch,
            replicas,
            at,
        });
    }

    /// Asks again, in a task of its own; what was known serves until then (and after a
    /// failure, for another [`REFRESH`]).
    fn refresh_in_background(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.refreshing.store(false, Ordering::Release);
            return;
        };
        let view = Arc::clone(self);
        runtime.spawn(async move {
            let name = LockName::from("(replicas)");
            let _asking = view.asking.lock().await;
            let epoch = view.conn.epoch();
            match view.ask(&name).await {
                Ok(replicas) => view.store(epoch, replicas),
                Err(error) => {
                    tracing::debug!(%error, "asking for the masters' replicas again failed");
                    if let Some(learned) = view.learned().as_mut() {
                        learned.at = Instant::now();
                    }
                }
            }
            view.refreshing.store(false, Ordering::Release);
        });
    }

    /// Forgets what was learned: the next acquisition asks again.
    pub(crate) fn forget(&self) {
        self.learned().take();
    }

    async fn ask(&self, name: &LockName) -> Result<Replicas, LockError> {
        let timeout = self.timeout;
        match &self.probe {
            Probe::Single(single) => {
                let (client, config) = &**single;
                let conn = client.get_multiplexed_async_connection_with_config(config);
                let online = async { online_replicas(conn.await?).await };
                Ok(Replicas::Master(bounded(name, timeout, online).await?))
            }
            #[cfg(feature = "sentinel")]
            Probe::Sentinel(sentinel) => {
                let online = async { online_replicas(sentinel.fresh().await?).await };
                Ok(Replicas::Master(bounded(name, timeout, online).await?))
            }
            #[cfg(feature = "cluster")]
            Probe::Cluster => {
                let (mut conn, mut cmd) = (self.conn.clone(), redis::cmd("CLUSTER"));
                let slots = cmd.arg("SLOTS").query_async(&mut conn);
                let slots: Vec<Vec<Value>> = bounded(name, timeout, slots).await?;
                Ok(Replicas::Shards(shards(&slots)))
            }
        }
    }
}

/// The Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part between its first
/// `{` and the next `}`, when not empty), else of the whole key, modulo 16384 — as
/// [`redis::cluster_routing::Slot::for_key`], whose number is private.
#[cfg(feature = "cluster")]
fn slot_of(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        Some(&rest[..close]).filter(|tag| !tag.is_empty())
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % 16384
}

/// `WAIT 0 0` on `conn`, a connection that wrote nothing: the master's online replicas.
/// (`WAIT` for no replica answers at once; its timeout is not used.)
async fn online_replicas(mut conn: redis::aio::MultiplexedConnection) -> RedisResult<usize> {
    redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query_async(&mut conn)
        .await
}

/// The shards of a `CLUSTER SLOTS` answer, sorted: each entry is the range's first and last
/// slot, its master, then one entry per replica. An entry that is not so is skipped (its
/// slots then count as without replicas).
#[cfg(feature = "cluster")]
fn shards(slots: &[Vec<Value>]) -> Vec<Shard> {
    let slot = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let mut shards: Vec<Shard> = (slots.iter())
        .filter_map(|entry| {
            let [first, last, _master, replicas @ ..] = entry.as_slice() else {
                return None;
            };
            Some(Shard {
                first: slot(first)?,
                last: slot(last)?,
                replicas: replicas.len(),
            })
        })
        .collect();
    shards.sort_by_key(|s| s.first);
    shards
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;

    fn node(port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
        ])
    }

    #[test]
    fn cluster_slots_give_each_ranges_replicas() {
        let slots = vec![
            vec![Value::Int(10923), Value::Int(16383), node(7002)],
            vec![Value::Int(0), Value::Int(5460), node(7000), node(7003)],
            vec![
                Value::Int(5461),
                Value::Int(10922),
                node(7001),
                node(7004),
                node(7005),
            ],
        ];
        let replicas = Replicas::Shards(shards(&slots));
        // `{a}` is slot 15495, `{b}` 3300, `{c}` 7365.
        assert_eq!(replicas.serving(b"{a}x"), 0);
        assert_eq!(replicas.serving(b"{b}x"), 1);
        assert_eq!(replicas.serving(b"{c}x"), 2);
        // A slot no range serves (mid-resharding, say) has no replica known.
        let partial = Replicas::Shards(shards(&slots[1..2]));
        assert_eq!(partial.serving(b"{a}x"), 0);
        assert_eq!(partial.serving(b"{b}x"), 1);
    }

    #[test]
    fn slots_are_those_of_the_cluster_client() {
        use redis::cluster_routing::Slot;
        let keys: [&[u8]; 9] = [
            b"a",
            b"{a}x",
            b"distlock:{order_7}",
            b"{}a",
            b"a{}b{c}",
            b"{a",
            b"}a{b}",
            b"",
            b"\xff{\x00}",
        ];
        for key in keys {
            assert_eq!(Slot::new(slot_of(key)), Some(Slot::for_key(key)), "{key:?}");
        }
        let numbered = (0..2000).map(|i| format!("distlock:{{name_{i}}}"));
        for key in numbered {
            assert_eq!(
                Slot::new(slot_of(key.as_bytes())),
                Some(Slot::for_key(&key))
            );
        }
    }

    #[test]
    fn malformed_entries_are_skipped() {
        let slots = vec![
            vec![Value::Int(0)],
            vec![Value::Nil, Value::Int(5), node(7000), node(7001)],
            vec![Value::Int(0), Value::Int(16383), node(7000), node(7001)],
        ];
        assert_eq!(
            shards(&slots),
            vec![Shard {
                first: 0,
                last: 16383,
                replicas: 1
            }]
        );
    }
}
