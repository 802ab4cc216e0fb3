//! The `dead-grant` control: a hand-off to a dead waiter keeps the name for a whole lease,
//! as grants did before they carried a short claim. The waiter-kill fault registers each
//! client just before it kills it, with the names its operations wait for; from then on,
//! for `WATCH`, whenever an owner of that client turns up in the lock of one of those
//! names, and was not in it at the registration, the control sets the lock's TTL to
//! [`LEASE`] once — what the old grant's `PEXPIRE` to the waiter's own lease did —
//! and nobody renews it. The hand-off checker must fire.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::LockClientBuilder;
use redis::{Cmd, FromRedisValue, RedisResult};
use tokio::time::{sleep, Instant};

use crate::workload::{EXCLUSIVE, READ_WRITE};

/// The lease a dead waiter's grant keeps: well past the hand-off checker's bound.
pub const LEASE: Duration = Duration::from_secs(10);
/// How long after its registration a killed client's owners are looked for: past the
/// liveness a waiter's queue entry keeps after its last refresh.
const WATCH: Duration = Duration::from_secs(15);
/// How often the locks are read.
const POLL: Duration = Duration::from_millis(20);

/// A connection to one server or to a Cluster.
#[derive(Clone)]
enum Conn {
    One(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Conn {
    async fn open(word: &str) -> RedisResult<Self> {
        if let Some(seeds) = word.strip_prefix("cluster:") {
            let client = redis::cluster::ClusterClient::new(seeds.split(',').collect::<Vec<_>>())?;
            return Ok(Self::Cluster(client.get_async_connection().await?));
        }
        let client = redis::Client::open(word)?;
        Ok(Self::One(client.get_multiplexed_async_connection().await?))
    }

    async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Self::One(c) => cmd.query_async(c).await,
            Self::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// `(key, owner field)` of every lock hash of the workload (read errors skip a key).
    async fn owners(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for name in EXCLUSIVE.iter().chain(&READ_WRITE) {
            let key = DeadGrant::key(name);
            let fields: HashMap<String, String> = self
                .query(redis::cmd("HGETALL").arg(&key))
                .await
                .unwrap_or_default();
            out.extend(fields.into_keys().map(|f| (key.clone(), f)));
        }
        out
    }
}

/// A killed client: its owners' prefix, the keys it waited for, and the `(key, owner)`
/// pairs already handled.
struct Watched {
    prefix: String,
    keys: BTreeSet<String>,
    until: Instant,
    seen: BTreeSet<(String, String)>,
}

#[derive(Default)]
struct Shared {
    watched: Vec<Watched>,
    kept: u64,
}

/// The running control. Cheap to clone.
#[derive(Clone)]
pub struct DeadGrant {
    conn: Conn,
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for DeadGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadGrant")
            .field("kept", &self.kept())
            .finish_non_exhaustive()
    }
}

impl DeadGrant {
    /// Connects to the lock servers (`word` as `fault::lock_url` spells them: one server's
    /// URL, or `cluster:<seeds>` from `lock_url::cluster`) and reads the locks every `POLL` until `until` +
    /// `WATCH`.
    ///
    /// # Errors
    /// When the servers cannot be reached.
    pub async fn start(word: &str, until: Instant) -> Result<Self, String> {
        let conn = Conn::open(word).await.map_err(|e| e.to_string())?;
        let control = Self {
            conn,
            shared: Arc::default(),
        };
        let polling = control.clone();
        tokio::spawn(async move {
            while Instant::now() < until + WATCH {
                sleep(POLL).await;
                polling.sweep().await;
            }
        });
        Ok(control)
    }

    /// The lock key of `name`, as the workload's clients name it.
    fn key(name: &str) -> String {
        format!("{}{name}", LockClientBuilder::DEFAULT_KEY_PREFIX)
    }

    /// Starts watching the client `id`, waiting for `names` (call just before killing it):
    /// the locks its owners are in now are theirs already; turning up in another of those
    /// is a grant to the dead.
    pub async fn watch(&self, id: &str, names: &[String]) {
        let prefix = format!("{id}:");
        let keys = names.iter().map(|n| Self::key(n)).collect();
        let seen = self
            .conn
            .clone()
            .owners()
            .await
            .into_iter()
            .filter(|(_, owner)| owner.starts_with(&prefix))
            .collect();
        let until = Instant::now() + WATCH;
        let watched = Watched {
            prefix,
            keys,
            until,
            seen,
        };
        self.lock().watched.push(watched);
    }

    /// How many grants to the dead the control kept for [`LEASE`].
    pub fn kept(&self) -> u64 {
        self.lock().kept
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One read of the locks; each new `(key, owner)` of a watched client gets its PEXPIRE.
    async fn sweep(&self) {
        let now = Instant::now();
        {
            let mut shared = self.lock();
            shared.watched.retain(|w| w.until > now);
            if shared.watched.is_empty() {
                return;
            }
        }
        let mut conn = self.conn.clone();
        let owners = conn.owners().await;
        let fresh: Vec<String> = {
            let mut shared = self.lock();
            let mut keys = Vec::new();
            for watched in &mut shared.watched {
                let theirs = |(k, o): &&(String, String)| {
                    o.starts_with(&watched.prefix) && watched.keys.contains(k)
                };
                for pair in owners.iter().filter(theirs) {
                    if watched.seen.insert(pair.clone()) {
                        keys.push(pair.0.clone());
                    }
                }
            }
            keys
        };
        for key in fresh {
            let ms = LEASE.as_millis() as u64;
            let set: RedisResult<i64> = conn.query(redis::cmd("PEXPIRE").arg(&key).arg(ms)).await;
            if set == Ok(1) {
                self.lock().kept += 1;
            }
        }
    }
}
