//! The connection to Redis: one server (a `ConnectionManager` that reconnects by itself), a
//! Redis Cluster (the redis crate's cluster client, which follows MOVED/ASK and failovers), or
//! the master a set of Sentinels names (looked up again after a failover).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
#[cfg(feature = "cluster")]
use redis::cluster::ClusterClient;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
#[cfg(feature = "cluster")]
use tokio::sync::OnceCell;

#[cfg(feature = "sentinel")]
use crate::transport::sentinel::SentinelConn;
use crate::transport::single_flight::SingleFlight;

/// A cheap-to-clone handle to the client's Redis.
#[derive(Clone)]
pub(crate) struct Conn {
    link: Link,
    /// Loads of the Functions library through this connection and its clones: calls that
    /// meet it missing together share one load.
    loads: Arc<SingleFlight>,
}

/// Where a [`Conn`] sends its commands.
#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(LazyCluster),
    #[cfg(feature = "sentinel")]
    Sentinel(SentinelConn),
}

/// A cluster connection made on first use, so building a client never blocks or fails on
/// an unreachable cluster.
#[cfg(feature = "cluster")]
#[derive(Clone)]
pub(crate) struct LazyCluster {
    client: Arc<ClusterClient>,
    conn: Arc<OnceCell<ClusterConnection>>,
}

#[cfg(feature = "cluster")]
impl LazyCluster {
    pub(crate) fn new(client: ClusterClient) -> Self {
        Self {
            client: Arc::new(client),
            conn: Arc::default(),
        }
    }

    /// Another lazy connection to the same cluster (its own connection to each node).
    pub(crate) fn sibling(&self) -> Self {
        Self {
            client: Arc::clone(&self.client),
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
    fn new(link: Link) -> Self {
        Self {
            link,
            loads: Arc::default(),
        }
    }

    /// A connection to one server.
    pub(crate) fn single(conn: ConnectionManager) -> Self {
        Self::new(Link::Single(conn))
    }

    /// A connection to a Cluster.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(conn: LazyCluster) -> Self {
        Self::new(Link::Cluster(conn))
    }

    /// A connection to the master that Sentinels name.
    #[cfg(feature = "sentinel")]
    pub(crate) fn sentinel(conn: SentinelConn) -> Self {
        Self::new(Link::Sentinel(conn))
    }

    /// The library loads of this connection and its clones.
    pub(crate) fn loads(&self) -> Arc<SingleFlight> {
        Arc::clone(&self.loads)
    }

    #[cfg(feature = "cluster")]
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    #[cfg(feature = "cluster")]
    pub(crate) fn as_cluster(&self) -> Option<&LazyCluster> {
        match &self.link {
            Link::Cluster(conn) => Some(conn),
            _ => None,
        }
    }

    #[cfg(feature = "sentinel")]
    pub(crate) fn as_sentinel(&self) -> Option<&SentinelConn> {
        match &self.link {
            Link::Sentinel(conn) => Some(conn),
            _ => None,
        }
    }

    /// Changes when this connection may have moved to another master: on a Sentinel client,
    /// the count of masters it connected to (one server and a Cluster keep theirs: 0).
    pub(crate) fn epoch(&self) -> u64 {
        match &self.link {
            #[cfg(feature = "sentinel")]
            Link::Sentinel(conn) => conn.connects(),
            _ => 0,
        }
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
        // At least 1 ms: `WAIT n 0` blocks until the replicas answer, however long.
        let millis = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        cmd.arg(replicas).arg(millis);
        Ok(redis::from_redis_value(self.on_node_of(key, &cmd).await?)?)
    }

    /// The `redis_version` of the server that owns `key` (`INFO server`).
    pub(crate) async fn server_version(&mut self, key: &[u8]) -> RedisResult<String> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        let info: String = redis::from_redis_value(self.on_node_of(key, &cmd).await?)?;
        let version = info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .unwrap_or("unknown");
        Ok(version.trim().to_owned())
    }

    /// Sends `cmd` to the server that owns `key`: the one server, the master Sentinels
    /// name, or on a Cluster the master of the key's slot (whatever the command's own
    /// routing would be).
    pub(crate) async fn on_node_of(&mut self, key: &[u8], cmd: &Cmd) -> RedisResult<Value> {
        #[cfg(not(feature = "cluster"))]
        let _ = key; // Only a Cluster routes by key.
        match &mut self.link {
            Link::Single(conn) => cmd.query_async(conn).await,
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => {
                let mut conn = sentinel.get().await?;
                sentinel.check(cmd.query_async(&mut conn).await)
            }
            #[cfg(feature = "cluster")]
            Link::Cluster(lazy) => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                // `route_command` hands a server's error back as a value (`query_async`
                // raises it): raised here, so a refused `FUNCTION LOAD` is not taken for done.
                let answer = lazy
                    .get()
                    .await?
                    .route_command(cmd.clone(), routing)
                    .await?;
                answer.extract_error()
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.link {
            Link::Single(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Link::Cluster(lazy) => {
                Box::pin(async move { lazy.get().await?.req_packed_command(cmd).await })
            }
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => Box::pin(async move {
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
        match &mut self.link {
            Link::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Link::Cluster(lazy) => Box::pin(async move {
                lazy.get()
                    .await?
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => Box::pin(async move {
                let mut conn = sentinel.get().await?;
                sentinel.check(conn.req_packed_commands(pipeline, offset, count).await)
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Single(conn) => conn.get_db(),
            #[cfg(any(feature = "cluster", feature = "sentinel"))]
            _ => 0,
        }
    }
}
