//! The master that a set of Redis Sentinels names, followed across failovers.
//!
//! The master is looked up on first use and again after any error that says the server went
//! away or is no longer a master. That alone leaves a window: after a failover the old
//! master keeps accepting writes until the Sentinels demote it (seconds; forever if they
//! cannot reach it), and a client still connected to it would grant and renew locks there
//! while others use the new master. So a follower asks a Sentinel every second where the
//! master is and drops the connection when it points elsewhere.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisResult};
use tokio_util::sync::CancellationToken;

/// How often the follower asks a Sentinel where the master is: the longest a client keeps
/// writing to a master the Sentinels have replaced (while it can reach a Sentinel).
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// A connection to the master that the Sentinels name. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SentinelConn {
    /// Finds and checks the master (asks the Sentinels, then `ROLE` on the master).
    sentinel: Arc<tokio::sync::Mutex<SentinelClient>>,
    current: Arc<Mutex<Option<Master>>>,
    config: AsyncConnectionConfig,
    follower: Arc<Follower>,
    /// How many masters this connection (and its clones) connected to: a new one may be
    /// another server, with other replicas.
    connects: Arc<AtomicU64>,
}

/// The connection in use, the address it goes to and the client that made it.
#[derive(Clone)]
struct Master {
    host: String,
    port: u16,
    conn: MultiplexedConnection,
    client: redis::Client,
}

/// A light, persistent line to one Sentinel (the next one after a failure) for
/// `SENTINEL get-master-addr-by-name`.
struct Follower {
    sentinels: Vec<redis::Client>,
    service: String,
    /// Bound on connecting to a Sentinel and on its answer (the command timeout).
    timeout: Duration,
    next: AtomicUsize,
    line: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl SentinelConn {
    pub(crate) fn new(
        sentinel: SentinelClient,
        sentinels: Vec<redis::Client>,
        service: String,
        timeout: Duration,
        config: AsyncConnectionConfig,
    ) -> Self {
        Self {
            sentinel: Arc::new(tokio::sync::Mutex::new(sentinel)),
            current: Arc::default(),
            config,
            follower: Arc::new(Follower {
                sentinels,
                service,
                timeout,
                next: AtomicUsize::new(0),
                line: tokio::sync::Mutex::new(None),
            }),
            connects: Arc::default(),
        }
    }

    /// Another connection to the same master, followed the same way.
    pub(crate) fn sibling(&self) -> Self {
        Self {
            sentinel: Arc::clone(&self.sentinel),
            current: Arc::default(),
            config: self.config.clone(),
            follower: Arc::clone(&self.follower),
            connects: Arc::default(),
        }
    }

    /// The current master's address as a client (for pub/sub too).
    ///
    /// The redis crate skips a master that its Sentinels flag `s_down`/`o_down`, and then
    /// finds none. The Sentinels can keep such a flag for seconds after a failover while
    /// naming that master and the master answering as one: every call of every client
    /// failed at once for 7 s in a 20-minute harness run. So when it finds none, the master
    /// is looked up as the Sentinel client protocol says — the address
    /// `SENTINEL get-master-addr-by-name` gives, if `ROLE` there answers `master`.
    pub(crate) async fn master_client(&self) -> RedisResult<redis::Client> {
        let found = self.sentinel.lock().await.async_get_client().await;
        match found {
            Err(e) if e.kind() == ErrorKind::MasterNameNotFoundBySentinel => {
                self.named_master().await.ok_or(e)
            }
            other => other,
        }
    }

    /// The master the Sentinels name, if it says it is one (a plain TCP connection without
    /// credentials, as the redis crate's lookup makes with no node settings).
    async fn named_master(&self) -> Option<redis::Client> {
        let (host, port) = self.follower.master_addr().await?;
        let client = redis::Client::open((host, port)).ok()?;
        let role = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("ROLE")
                .query_async::<Vec<redis::Value>>(&mut conn)
                .await
        };
        let role = tokio::time::timeout(self.follower.timeout, role)
            .await
            .ok()?
            .ok()?;
        let master = matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master");
        master.then_some(client)
    }

    /// The connection to the master, made when there is none.
    pub(crate) async fn get(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(master) = self.slot().clone() {
            return Ok(master.conn);
        }
        let client = self.master_client().await?;
        let (host, port) = host_port(client.get_connection_info().addr());
        let conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *self.slot() = Some(Master {
            host,
            port,
            conn: conn.clone(),
            client,
        });
        self.connects.fetch_add(1, Ordering::AcqRel);
        Ok(conn)
    }

    /// How many times this connection connected to a master so far.
    pub(crate) fn connects(&self) -> u64 {
        self.connects.load(Ordering::Acquire)
    }

    /// A new connection, of its own, to the master this one goes to (connecting this one
    /// first if needed): for a question whose answer depends on what the connection it
    /// runs on wrote (`WAIT`).
    pub(crate) async fn fresh(&self) -> RedisResult<MultiplexedConnection> {
        self.get().await?;
        let client = self.slot().as_ref().map(|master| master.client.clone());
        let client = match client {
            Some(client) => client,
            // Forgotten meanwhile (an error, a move): the master the Sentinels name now.
            None => self.master_client().await?,
        };
        client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }

    fn slot(&self) -> MutexGuard<'_, Option<Master>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the connection after an error that means "ask the Sentinels again".
    pub(crate) fn check<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result {
            let demoted =
                error.code() == Some("READONLY") || error.to_string().contains("READONLY");
            if demoted || error.is_io_error() || error.is_connection_dropped() || error.is_timeout()
            {
                *self.slot() = None;
            }
        }
        result
    }

    /// Forgets the connection when it goes elsewhere than `host:port`, the master the
    /// Sentinels name: the next call then connects to the new master.
    fn follow(&self, host: &str, port: u16) {
        let mut slot = self.slot();
        if slot
            .as_ref()
            .is_some_and(|m| (m.host.as_str(), m.port) != (host, port))
        {
            tracing::info!(%host, port, "sentinel: the master moved; reconnecting");
            *slot = None;
        }
    }
}

impl Follower {
    /// The master's address as the Sentinels see it, trying each Sentinel at most once.
    async fn master_addr(&self) -> Option<(String, u16)> {
        let timeout = self.timeout;
        let mut line = self.line.lock().await;
        for _ in 0..self.sentinels.len() {
            if line.is_none() {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.sentinels.len();
                let connect = self.sentinels[i].get_multiplexed_async_connection();
                *line = tokio::time::timeout(timeout, connect).await.ok()?.ok();
            }
            let Some(conn) = line.as_mut() else { continue };
            let mut ask = redis::cmd("SENTINEL");
            ask.arg("get-master-addr-by-name").arg(&self.service);
            let asked = ask.query_async::<Option<(String, u16)>>(conn);
            match tokio::time::timeout(timeout, asked).await {
                Ok(Ok(addr)) => return addr,
                _ => *line = None,
            }
        }
        None
    }
}

/// Every [`FOLLOW_EVERY`] until `stop` fires, asks a Sentinel where the master is and has
/// each of `conns` (one client's connections, sharing one follower) follow it.
pub(crate) async fn follow_master(conns: Vec<SentinelConn>, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(FOLLOW_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Some((host, port)) = conns[0].follower.master_addr().await {
            conns.iter().for_each(|conn| conn.follow(&host, port));
        }
    }
}

/// Host and port of a TCP address (a Unix socket is no Sentinel-managed master).
fn host_port(addr: &ConnectionAddr) -> (String, u16) {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            (host.clone(), *port)
        }
        other => (other.to_string(), 0),
    }
}
