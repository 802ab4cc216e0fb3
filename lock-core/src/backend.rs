//! The connection to Redis: one server (a `ConnectionManager` that reconnects by itself), a
//! Redis Cluster (the redis crate's cluster client, which follows MOVED/ASK and failovers), or
//! the master a set of Sentinels names (looked up again after a failover).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::OnceCell;

/// A cheap-to-clone handle to the client's Redis.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(LazyCluster),
    Sentinel(SentinelConn),
}

/// A cluster connection made on first use, so building a client never blocks or fails on
/// an unreachable cluster.
#[derive(Clone)]
pub(crate) struct LazyCluster {
    client: Arc<ClusterClient>,
    conn: Arc<OnceCell<ClusterConnection>>,
}

impl LazyCluster {
    pub(crate) fn new(client: ClusterClient) -> Self {
        Self {
            client: Arc::new(client),
            conn: Arc::default(),
        }
    }

    pub(crate) async fn get(&self) -> RedisResult<ClusterConnection> {
        self.conn
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

impl Conn {
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// `WAIT replicas timeout` on the server that owns `key`: how many replicas have every
    /// write this client sent there so far.
    pub(crate) async fn wait_replicas(
        &mut self,
        key: &[u8],
        replicas: usize,
        timeout: Duration,
    ) -> RedisResult<usize> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        match self {
            Self::Single(conn) => cmd.query_async(conn).await,
            Self::Sentinel(sentinel) => {
                let mut conn = sentinel.get().await?;
                sentinel.check(cmd.query_async(&mut conn).await)
            }
            Self::Cluster(lazy) => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let value = lazy.get().await?.route_command(cmd, routing).await?;
                Ok(redis::from_redis_value(value)?)
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(lazy) => {
                Box::pin(async move { lazy.get().await?.req_packed_command(cmd).await })
            }
            Self::Sentinel(sentinel) => Box::pin(async move {
                let mut conn = sentinel.get().await?;
                sentinel.check(conn.req_packed_command(cmd).await)
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(lazy) => Box::pin(async move {
                lazy.get()
                    .await?
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
            Self::Sentinel(sentinel) => Box::pin(async move {
                let mut conn = sentinel.get().await?;
                sentinel.check(conn.req_packed_commands(pipeline, offset, count).await)
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(_) | Self::Sentinel(_) => 0,
        }
    }
}

/// The Cluster slot of a key (used to batch renewals per slot).
pub(crate) fn slot(key: &[u8]) -> Slot {
    Slot::for_key(key)
}

/// A connection to the master that the Sentinels name. The master is looked up on first use
/// and again after any error that says the server went away or is no longer a master
/// (a failover), so the client follows the new master by itself.
#[derive(Clone)]
pub(crate) struct SentinelConn {
    sentinel: Arc<tokio::sync::Mutex<SentinelClient>>,
    current: Arc<std::sync::Mutex<Option<MultiplexedConnection>>>,
    config: AsyncConnectionConfig,
}

impl SentinelConn {
    pub(crate) fn new(sentinel: SentinelClient, config: AsyncConnectionConfig) -> Self {
        Self {
            sentinel: Arc::new(tokio::sync::Mutex::new(sentinel)),
            current: Arc::default(),
            config,
        }
    }

    /// The current master's address as a client (for pub/sub).
    pub(crate) async fn master_client(&self) -> RedisResult<redis::Client> {
        self.sentinel.lock().await.async_get_client().await
    }

    async fn get(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(conn) = self.slot().clone() {
            return Ok(conn);
        }
        let client = self.master_client().await?;
        let conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *self.slot() = Some(conn.clone());
        Ok(conn)
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets the connection after an error that means "ask the Sentinels again".
    fn check<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
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
}
