//! Making the connections of a client, per topology. All of them connect lazily: building a
//! client never blocks or fails on an unreachable Redis.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::LockError;
#[cfg(feature = "cluster")]
use crate::protocol::messages::Publish;
use crate::transport::backend::Conn;
use crate::transport::pubsub::PubSubSource;
use crate::transport::replicas::Probe;

/// Where the locks live.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// One Redis server (or a proxy in front of one).
    Single(String),
    /// A Redis Cluster, found through these seed nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
    /// Independent masters, locked by majority (Redlock).
    Redlock(Vec<String>),
    /// The master that these Sentinels name for `service`.
    #[cfg(feature = "sentinel")]
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
    /// A second connection for `WAIT` (replica acknowledgements; connected on first use).
    pub(crate) replication: bool,
    /// How release messages are published (on a Cluster: which pub/sub to listen with).
    #[cfg(feature = "cluster")]
    pub(crate) publish: Publish,
}

/// The connections of one client.
pub(crate) struct Connections {
    /// Commands: one connection, or one per Redlock node.
    pub(crate) nodes: Vec<Conn>,
    /// Where the waiters' pub/sub connection goes.
    pub(crate) pubsub: PubSubSource,
    /// With replica acknowledgements: a second connection to the same place, for `WAIT`,
    /// connected when first used. `WAIT` blocks the connection it runs on, and must not
    /// stall every other lock's commands on the shared one while replicas lag.
    pub(crate) replication: Option<Conn>,
    /// How to learn the masters' replicas (none under Redlock).
    pub(crate) probe: Option<Probe>,
}

/// TLS settings for `rediss://` URLs: the `tls` feature's certificates; without the
/// feature there are none to give (the type has no values).
#[cfg(feature = "tls")]
pub(crate) type Tls = redis::TlsCertificates;
/// TLS settings for `rediss://` URLs: the `tls` feature's certificates; without the
/// feature there are none to give (the type has no values).
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum Tls {}

/// Makes the connections for `topology`.
///
/// # Errors
/// [`LockError::InvalidConfig`] for a URL the redis crate rejects, or a `rediss://` URL
/// without the `tls` feature.
pub(crate) fn connect(
    topology: &Topology,
    tls: Option<&Tls>,
    options: &ConnectOptions,
) -> Result<Connections, LockError> {
    let open = Opener { tls };
    match topology {
        Topology::Single(url) => {
            let client = open.one(url)?;
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(options.connect_timeout))
                .set_response_timeout(Some(options.command_timeout));
            Ok(Connections {
                nodes: vec![single(&client, options)?],
                replication: (options.replication)
                    .then(|| single(&client, options))
                    .transpose()?,
                probe: Some(Probe::Single(Box::new((client.clone(), config)))),
                pubsub: PubSubSource::Nodes(vec![client]),
            })
        }
        Topology::Redlock(urls) => {
            let clients = open.all(urls)?;
            let nodes = clients
                .iter()
                .map(|c| single(c, options))
                .collect::<Result<_, _>>()?;
            Ok(Connections {
                nodes,
                // Redlock waits for no replica (validation rejects `ReplicaAck::Require`).
                replication: None,
                probe: None,
                pubsub: PubSubSource::Nodes(clients),
            })
        }
        #[cfg(feature = "sentinel")]
        Topology::Sentinel { sentinels, service } => sentinel(&open, sentinels, service, options),
        #[cfg(feature = "cluster")]
        Topology::Cluster(seeds) => cluster(&open, seeds, options),
    }
}

/// A URL the redis crate rejects, as a configuration error.
fn bad_url(error: redis::RedisError) -> LockError {
    LockError::invalid_config(format!("redis url: {error}"))
}

/// Opens `redis::Client`s, with the client's TLS settings if any.
struct Opener<'a> {
    tls: Option<&'a Tls>,
}

impl Opener<'_> {
    fn one(&self, url: &str) -> Result<redis::Client, LockError> {
        match self.tls {
            #[cfg(feature = "tls")]
            Some(tls) => redis::Client::build_with_tls(url, tls.clone()).map_err(bad_url),
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
            #[cfg(not(feature = "tls"))]
            None if url.starts_with("rediss:") => Err(LockError::invalid_config(format!(
                "redis url {url:?}: rediss:// needs lock-core's `tls` feature"
            ))),
            None => redis::Client::open(url).map_err(bad_url),
        }
    }

    fn all(&self, urls: &[String]) -> Result<Vec<redis::Client>, LockError> {
        urls.iter().map(|url| self.one(url)).collect()
    }
}

/// The master that `sentinels` name for `service`, followed across failovers.
#[cfg(feature = "sentinel")]
fn sentinel(
    open: &Opener<'_>,
    sentinels: &[String],
    service: &str,
    options: &ConnectOptions,
) -> Result<Connections, LockError> {
    use redis::sentinel::{SentinelClient, SentinelServerType};

    use crate::transport::sentinel::SentinelConn;

    // A `String`: redis' `build` takes one without its TLS support (any `AsRef<str>` with).
    let service = service.to_owned();
    let sentinel = SentinelClient::build(
        sentinels.to_vec(),
        service.clone(),
        None,
        SentinelServerType::Master,
    )
    .map_err(bad_url)?;
    let connection = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        .set_response_timeout(Some(options.command_timeout));
    let conn = SentinelConn::new(
        sentinel,
        open.all(sentinels)?,
        service,
        options.command_timeout,
        connection,
    );
    Ok(Connections {
        nodes: vec![Conn::sentinel(conn.clone())],
        replication: (options.replication).then(|| Conn::sentinel(conn.sibling())),
        // The command connection's own handle: it asks the master that one goes to.
        probe: Some(Probe::Sentinel(conn.clone())),
        pubsub: PubSubSource::Sentinel(conn),
    })
}

/// The cluster client's wait before retrying a `TRYAGAIN` (a slot mid-migration whose keys
/// are split between two masters), `CLUSTERDOWN` or `LOADING`, in milliseconds: at least the
/// first, at most the second, doubling from 20 ms. The redis crate waits at least 1.28 s,
/// more than most calls' command timeout: a call that met a slot being resharded timed out
/// although the slot moved in milliseconds.
#[cfg(feature = "cluster")]
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 500);

/// A Redis Cluster found through `seeds`.
#[cfg(feature = "cluster")]
fn cluster(
    open: &Opener<'_>,
    seeds: &[String],
    options: &ConnectOptions,
) -> Result<Connections, LockError> {
    use redis::cluster::ClusterClientBuilder;

    use crate::transport::backend::LazyCluster;

    let builder = || {
        let builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.command_timeout)
            .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
            .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1);
        match open.tls {
            #[cfg(feature = "tls")]
            Some(tls) => builder.certs(tls.clone()),
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
            None => builder,
        }
    };
    let cluster = LazyCluster::new(builder().build().map_err(bad_url)?);
    let pubsub = match options.publish {
        // Its own connections: RESP3, with pushes for the sharded subscriptions.
        Publish::Sharded => {
            let (pushes, received) = tokio::sync::mpsc::unbounded_channel();
            let client = builder()
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(pushes)
                .build()
                .map_err(bad_url)?;
            PubSubSource::Sharded(Box::new(client), received)
        }
        Publish::Plain => PubSubSource::Nodes(open.all(seeds)?),
    };
    Ok(Connections {
        replication: (options.replication).then(|| Conn::cluster(cluster.sibling())),
        probe: Some(Probe::Cluster),
        nodes: vec![Conn::cluster(cluster)],
        pubsub,
    })
}

/// A lazily connecting, self-reconnecting connection to one server.
fn single(client: &redis::Client, options: &ConnectOptions) -> Result<Conn, LockError> {
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        .set_response_timeout(Some(options.command_timeout))
        .set_max_delay(Duration::from_secs(1))
        // Fail a call soon after Redis went away; the next call reconnects again.
        .set_number_of_retries(3);
    ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
        .map(Conn::single)
        .map_err(bad_url)
}
