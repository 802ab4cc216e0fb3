//! Making the connections of a client, per topology. All of them connect lazily: building a
//! client never blocks or fails on an unreachable Redis.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{AsyncConnectionConfig, ProtocolVersion};

use crate::error::LockError;
use crate::protocol::scripts::Publish;
use crate::transport::backend::{Conn, LazyCluster};
use crate::transport::pubsub::PubSubSource;
use crate::transport::sentinel::SentinelConn;

/// Where the locks live.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// One Redis server (or a proxy in front of one).
    Single(String),
    /// A Redis Cluster, found through these seed nodes.
    Cluster(Vec<String>),
    /// Independent masters, locked by majority (Redlock).
    Redlock(Vec<String>),
    /// The master that these Sentinels name for `service`.
    Sentinel {
        sentinels: Vec<String>,
        service: String,
    },
}

/// What the connections need to know of the client's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectOptions {
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// A second connection for `WAIT` (`min_replicas`).
    pub(crate) replication: bool,
    /// How release messages are published (on a Cluster: which pub/sub to listen with).
    pub(crate) publish: Publish,
}

/// The connections of one client.
pub(crate) struct Connections {
    /// Commands: one connection, or one per Redlock node.
    pub(crate) nodes: Vec<Conn>,
    /// Where the waiters' pub/sub connection goes.
    pub(crate) pubsub: PubSubSource,
    /// With `min_replicas`: a second connection to the same place, for `WAIT`. `WAIT`
    /// blocks the connection it runs on, and must not stall every other lock's commands on
    /// the shared one while replicas lag.
    pub(crate) replication: Option<Conn>,
}

/// Makes the connections for `topology`.
///
/// # Errors
/// [`LockError::InvalidConfig`] for a URL the redis crate rejects.
pub(crate) fn connect(
    topology: &Topology,
    tls: Option<&redis::TlsCertificates>,
    config: &ConnectOptions,
) -> Result<Connections, LockError> {
    let bad = |e: redis::RedisError| LockError::invalid_config(format!("redis url: {e}"));
    let open = |url: &str| match tls {
        Some(tls) => redis::Client::build_with_tls(url, tls.clone()),
        None => redis::Client::open(url),
    };
    let open_all = |urls: &[String]| -> Result<Vec<redis::Client>, LockError> {
        urls.iter()
            .map(|u| open(u))
            .collect::<Result<_, _>>()
            .map_err(bad)
    };
    let replicated = config.replication;
    match topology {
        Topology::Single(url) => {
            let client = open(url).map_err(bad)?;
            Ok(Connections {
                nodes: vec![single(&client, config).map_err(bad)?],
                replication: replicated
                    .then(|| single(&client, config))
                    .transpose()
                    .map_err(bad)?,
                pubsub: PubSubSource::Nodes(vec![client]),
            })
        }
        Topology::Sentinel { sentinels, service } => {
            let sentinel = SentinelClient::build(
                sentinels.clone(),
                service.as_str(),
                None,
                SentinelServerType::Master,
            )
            .map_err(bad)?;
            let connection = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(Some(config.command_timeout));
            let conn = SentinelConn::new(
                sentinel,
                open_all(sentinels)?,
                service.clone(),
                config.command_timeout,
                connection,
            );
            Ok(Connections {
                nodes: vec![Conn::Sentinel(conn.clone())],
                replication: replicated.then(|| Conn::Sentinel(conn.sibling())),
                pubsub: PubSubSource::Sentinel(conn),
            })
        }
        Topology::Redlock(urls) => {
            let clients = open_all(urls)?;
            let nodes = clients
                .iter()
                .map(|c| single(c, config))
                .collect::<Result<_, _>>()
                .map_err(bad)?;
            Ok(Connections {
                nodes,
                // Validation rejects `min_replicas` with Redlock.
                replication: None,
                pubsub: PubSubSource::Nodes(clients),
            })
        }
        Topology::Cluster(seeds) => {
            let builder = || {
                let builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.command_timeout);
                match tls {
                    Some(tls) => builder.certs(tls.clone()),
                    None => builder,
                }
            };
            let cluster = LazyCluster::new(builder().build().map_err(bad)?);
            let pubsub = match config.publish {
                // Its own connections: RESP3, with pushes for the sharded subscriptions.
                Publish::Sharded => {
                    let (pushes, received) = tokio::sync::mpsc::unbounded_channel();
                    let client = builder()
                        .use_protocol(ProtocolVersion::RESP3)
                        .push_sender(pushes)
                        .build()
                        .map_err(bad)?;
                    PubSubSource::Sharded(Box::new(client), received)
                }
                Publish::Plain => PubSubSource::Nodes(open_all(seeds)?),
            };
            Ok(Connections {
                replication: replicated.then(|| Conn::Cluster(cluster.sibling())),
                nodes: vec![Conn::Cluster(cluster)],
                pubsub,
            })
        }
    }
}

/// A lazily connecting, self-reconnecting connection to one server.
fn single(client: &redis::Client, config: &ConnectOptions) -> redis::RedisResult<Conn> {
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.command_timeout))
        .set_max_delay(Duration::from_secs(1))
        // Fail a call soon after Redis went away; the next call reconnects again.
        .set_number_of_retries(3);
    ConnectionManager::new_lazy_with_config(client.clone(), manager_config).map(Conn::Single)
}
