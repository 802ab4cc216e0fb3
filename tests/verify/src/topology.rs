//! The lock servers of each topology (private processes on free loopback ports), and the
//! client a client process builds from their addresses.

use std::time::Duration;

use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer, TcpProxy};
use lock_core::{LockClient, LockError};

use crate::args::Topology;
use crate::workload::LEASE;

/// The servers the locks live on. Dropping it stops them.
#[derive(Debug)]
pub enum Servers {
    /// One server with an append-only file synced on every write, behind the proxy.
    Single {
        /// The server.
        server: RedisServer,
        /// The proxy the clients connect through.
        proxy: TcpProxy,
    },
    /// Three masters with a replica each.
    Cluster(RedisCluster),
    /// A master, a replica and three Sentinels.
    Sentinel(RedisSentinels),
    /// Three independent masters.
    Redlock(Vec<RedisServer>),
}

impl Servers {
    /// Starts the servers of `topology` (blocking; call from a blocking context).
    pub fn start(topology: Topology, runtime: &tokio::runtime::Handle) -> Self {
        match topology {
            Topology::Single => {
                let server = RedisServer::builder()
                    .args(["--appendonly", "yes", "--appendfsync", "always"])
                    .start();
                let _enter = runtime.enter();
                let proxy = TcpProxy::start(server.addr());
                Self::Single { server, proxy }
            }
            Topology::Cluster => Self::Cluster(RedisCluster::start(3, 1)),
            Topology::Sentinel => Self::Sentinel(RedisSentinels::start()),
            Topology::Redlock => Self::Redlock((0..3).map(|_| RedisServer::start()).collect()),
        }
    }

    /// The addresses a client process is given.
    pub fn urls(&self) -> Vec<String> {
        match self {
            Self::Single { proxy, .. } => vec![proxy.url()],
            Self::Cluster(cluster) => cluster.seed_urls(),
            Self::Sentinel(set) => set.sentinel_urls(),
            Self::Redlock(nodes) => nodes.iter().map(RedisServer::url).collect(),
        }
    }

    /// Every running data server (not the Sentinels), for the key count at the end.
    pub fn data_servers(&self) -> Vec<&RedisServer> {
        let all: Vec<&RedisServer> = match self {
            Self::Single { server, .. } => vec![server],
            Self::Cluster(cluster) => cluster.nodes().iter().collect(),
            Self::Sentinel(set) => set.servers.iter().collect(),
            Self::Redlock(nodes) => nodes.iter().collect(),
        };
        all.into_iter().filter(|s| s.is_running()).collect()
    }
}

/// The client of a client process: `urls` as [`Servers::urls`] gave them.
///
/// # Errors
/// As `LockClientBuilder::build`.
pub fn client(topology: Topology, urls: &[String]) -> Result<LockClient, LockError> {
    let builder = match topology {
        Topology::Single => LockClient::builder(urls[0].clone()),
        Topology::Cluster => LockClient::cluster(urls.iter().cloned()),
        Topology::Sentinel => LockClient::sentinel(urls.iter().cloned(), SERVICE),
        Topology::Redlock => LockClient::redlock(urls.iter().cloned()),
    };
    builder
        .lease(LEASE)
        .command_timeout(Duration::from_millis(1000))
        .connect_timeout(Duration::from_millis(1000))
        .service_name("distlock-verify")
        .build()
}

/// Keys left on `server` (bounded: a short-lived connection with timeouts).
pub fn keys_left(server: &RedisServer) -> Result<Vec<String>, String> {
    let mut conn = server
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    redis::cmd("KEYS")
        .arg("*")
        .query(&mut conn)
        .map_err(|e| e.to_string())
}
