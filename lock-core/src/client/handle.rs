//! The client handle: connection, settings and background tasks.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::FromRedisValue;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::client::builder::LockClientBuilder;
use crate::client::config::Config;
use crate::error::{bounded, LockError};
use crate::lock::request::LockRequest;
use crate::lock::watchdog::{self, Watchdog};
use crate::protocol::kind::{Kind, EXCLUSIVE};
use crate::protocol::name::{LockKeys, LockName};
use crate::protocol::scripts::Call;
use crate::transport::backend::Conn;
use crate::transport::connect::{connect, ConnectOptions, Connections, Tls, Topology};
use crate::transport::waiters::Waiters;

/// A handle to distributed locks on one Redis. Cheap to clone: clones share one multiplexed
/// connection (which reconnects by itself after a dropped connection or a Redis restart),
/// one pub/sub connection for waiters and one watchdog task.
///
/// ```no_run
/// # async fn demo() -> Result<(), lock_core::LockError> {
/// let client = lock_core::LockClient::new("redis://127.0.0.1:6379")?;
/// let guard = client.lock("item_7").await?;
/// // … the critical section …
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    /// The UUID that starts every owner id of this client (`<uuid>:<owner number>`).
    pub(crate) id: Arc<str>,
    pub(crate) config: Config,
    /// The holder metadata of acquisitions without a request id, encoded once.
    holder_meta: String,
    /// One connection, or one per Redlock node.
    pub(crate) nodes: Vec<Conn>,
    /// The connection for replica acknowledgements (`WAIT`), with `min_replicas`.
    pub(crate) replication: Option<Conn>,
    pub(crate) waiters: Waiters,
    pub(crate) watchdog: Watchdog,
    _stop: DropGuard,
}

impl fmt::Debug for ClientInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// Shortest per-node timeout of a Redlock client.
const REDLOCK_MIN_NODE_TIMEOUT: Duration = Duration::from_millis(50);

impl LockClient {
    /// A builder for a client of one Redis server, with every setting at its default.
    pub fn builder(url: impl Into<String>) -> LockClientBuilder {
        LockClientBuilder::new(Topology::Single(url.into()))
    }

    /// A builder for a client of a Redis Cluster, found through `seeds` (URLs of any nodes).
    /// Lock, fencing counter, queue and channel of one name always share a slot; commands
    /// follow MOVED/ASK redirections and failovers. Release messages use sharded pub/sub
    /// (Redis 7.0+): waiters listen on the master that owns the lock's slot, follow it across
    /// failovers, and interoperate with Redisson 3.23+ (see
    /// [`sharded_pubsub`](LockClientBuilder::sharded_pubsub) for older clusters).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), lock_core::LockError> {
    /// let client = lock_core::LockClient::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster(seeds: impl IntoIterator<Item = impl Into<String>>) -> LockClientBuilder {
        LockClientBuilder::new(Topology::Cluster(
            seeds.into_iter().map(Into::into).collect(),
        ))
    }

    /// A builder for a client of the master that `sentinels` (URLs of Redis Sentinels) name
    /// for `service`. The master is looked up when first needed and again after a failover
    /// (a dropped connection or a `READONLY` answer from a demoted master), so the client
    /// follows the new master; guards whose key did not survive the failover report lost at
    /// their next renewal. Combine with [`min_replicas`](LockClientBuilder::min_replicas) to
    /// make that rarer.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), lock_core::LockError> {
    /// let client = lock_core::LockClient::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "mymaster",
    /// )
    /// .build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn sentinel(
        sentinels: impl IntoIterator<Item = impl Into<String>>,
        service: impl Into<String>,
    ) -> LockClientBuilder {
        LockClientBuilder::new(Topology::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            service: service.into(),
        })
    }

    /// A builder for a Redlock client over independent Redis masters (3 or 5, say): a lock is
    /// held when a majority (`N/2 + 1`) granted it within its validity
    /// (lease − elapsed − drift); renewals need a majority too, and the guard reports the lock
    /// lost when a majority no longer has it (or none confirms it before the local deadline).
    /// Calls to each node are bounded by the smaller of the command timeout and a hundredth of
    /// the lease (at least 50 ms), so a slow or dead minority cannot eat the lease. Waiters retry after a short random
    /// delay or on a release message (no fair queue: queues on independent nodes would
    /// disagree). Fencing tokens are the highest counter among the granting majority: see
    /// SAFETY.md for what they do and do not promise under Redlock.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), lock_core::LockError> {
    /// let client = lock_core::LockClient::redlock([
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ])
    /// .build()?;
    /// # Ok(()) }
    /// ```
    pub fn redlock(nodes: impl IntoIterator<Item = impl Into<String>>) -> LockClientBuilder {
        LockClientBuilder::new(Topology::Redlock(
            nodes.into_iter().map(Into::into).collect(),
        ))
    }

    /// A client for `url` with default settings (see [`LockClientBuilder::build`]).
    ///
    /// # Errors
    /// As [`LockClientBuilder::build`].
    pub fn new(url: impl Into<String>) -> Result<Self, LockError> {
        Self::builder(url).build()
    }

    /// Starts a request for the lock `name`; `.await` it to acquire (waiting up to the
    /// client's default wait), or set `.lease(…)`, `.wait(…)` first.
    pub fn lock(&self, name: impl Into<LockName>) -> LockRequest {
        LockRequest::new(self.clone(), name.into(), &EXCLUSIVE)
    }

    /// Runs `fut` under the lock `name` and releases it afterwards, whatever happens
    /// (return, panic, cancellation). If the lock is lost meanwhile, `fut` is dropped at its
    /// next `.await` and [`LockError::Lost`] returned. Shorthand for
    /// `self.lock(name).run(fut)`; see [`LockRequest::run`].
    ///
    /// # Errors
    /// The acquisition errors of [`LockRequest::acquire`], and [`LockError::Lost`].
    ///
    /// # Cancel safety
    /// Dropping this future drops `fut` and releases the lock in the background.
    pub async fn with_lock<F: Future>(
        &self,
        name: impl Into<LockName>,
        fut: F,
    ) -> Result<F::Output, LockError> {
        self.lock(name).run(fut).await
    }

    /// Connects (lazily) and starts the background tasks of a client with a validated
    /// `config`.
    pub(crate) fn start(
        topology: &Topology,
        tls: Option<&Tls>,
        config: Config,
    ) -> Result<Self, LockError> {
        let options = ConnectOptions {
            connect_timeout: config.connect_timeout,
            command_timeout: config.command_timeout,
            replication: config.min_replicas.is_some(),
            #[cfg(feature = "cluster")]
            publish: config.publish,
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            LockError::invalid_config("LockClient must be built inside a Tokio runtime")
        })?;
        let Connections {
            nodes,
            pubsub,
            replication,
        } = connect(topology, tls, &options)?;
        let stop = CancellationToken::new();
        let _guard = runtime.enter();
        let waiters = Waiters::start(pubsub, config.command_timeout, stop.child_token());
        #[cfg(feature = "sentinel")]
        {
            let sentinels: Vec<_> = (nodes.iter().chain(&replication))
                .filter_map(Conn::as_sentinel)
                .cloned()
                .collect();
            if !sentinels.is_empty() {
                let follow = crate::transport::sentinel::follow_master;
                runtime.spawn(follow(sentinels, stop.child_token()));
            }
        }
        let inner = Arc::new(ClientInner {
            id: uuid::Uuid::new_v4().to_string().into(),
            nodes,
            replication,
            waiters,
            watchdog: Watchdog::default(),
            _stop: stop.clone().drop_guard(),
            holder_meta: config.holder.encode(None),
            config,
        });
        runtime.spawn(watchdog::run(
            Arc::downgrade(&inner),
            inner.config.watchdog_interval,
            stop,
        ));
        Ok(LockClient { inner })
    }

    /// How long a request of this client waits for a busy lock unless it says otherwise
    /// ([`LockClientBuilder::wait`]); `None` waits until the lock is free. The macro and
    /// lock-tower's layer use it too, so one setting governs every wait.
    pub fn default_wait(&self) -> Option<Duration> {
        self.inner.config.wait
    }

    /// The UUID that starts this client's Redis owner ids.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Number of locks the watchdog currently renews.
    pub fn renewing(&self) -> usize {
        self.inner.watchdog.len()
    }

    /// Number of release channels with a waiter of this client subscribed.
    pub fn waited_channels(&self) -> usize {
        self.inner.waiters.channel_count()
    }
}

impl ClientInner {
    /// The holder metadata an acquisition sends: the client's own, borrowed, unless the
    /// request names a request id.
    pub(crate) fn holder_meta(&self, request_id: Option<&str>) -> Cow<'_, str> {
        match request_id {
            None => Cow::Borrowed(&self.holder_meta),
            Some(_) => Cow::Owned(self.config.holder.encode(request_id)),
        }
    }

    /// The keys of the lock `name` under this client's prefix.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty name or one above the client's limit.
    pub(crate) fn keys(&self, name: &LockName, kind: &'static Kind) -> Result<LockKeys, LockError> {
        if let Some(reason) = name.invalid_reason(self.config.max_name_len) {
            return Err(LockError::InvalidName {
                name: name.clone(),
                reason,
            });
        }
        let fenced = self.nodes.len() > 1;
        Ok(LockKeys::new(&self.config.key_prefix, name, kind, fenced))
    }

    /// The connection for calls that go to one place (the server, the Cluster, or the first
    /// Redlock node).
    pub(crate) fn conn(&self) -> Conn {
        self.nodes[0].clone()
    }

    /// How many nodes must agree: 1, or a majority of the Redlock nodes.
    pub(crate) fn quorum(&self) -> usize {
        crate::lock::quorum::quorum(self.nodes.len())
    }

    /// Bound on one call to one node: the command timeout, or for Redlock nodes a hundredth
    /// of the lease of the lock concerned (at least 50 ms), so a slow or dead minority cannot
    /// eat the lease.
    fn node_timeout(&self, lease: Duration) -> Duration {
        match self.nodes.len() {
            1 => self.config.command_timeout,
            _ => (self.config.command_timeout).min((lease / 100).max(REDLOCK_MIN_NODE_TIMEOUT)),
        }
    }

    /// Runs one script call about a lock with `lease` on every node at once, each within the
    /// node timeout, and waits for every answer.
    pub(crate) async fn eval_each<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
    ) -> Vec<Result<T, LockError>> {
        self.eval_until(name, lease, call, |_| false).await
    }

    /// Runs one script call on every node at once, each within the node timeout, and returns
    /// the answers so far (in arrival order) as soon as `decided` says they settle the
    /// outcome, or when all are in.
    ///
    /// Redlock: a dead or slow minority then costs the caller nothing once a quorum has
    /// answered. The calls still pending run on in the background until they answer or time
    /// out, so every reachable node gets the write: a lock on a bare majority would be lost
    /// with any one of its nodes (and a node's first call, EVALSHA → NOSCRIPT → EVAL, is the
    /// slowest). Used only with idempotent scripts (acquire, renew, fence floor): a late hold
    /// on a node is this owner's and goes with its renewal, release or lease.
    pub(crate) async fn eval_until<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
        mut decided: impl FnMut(&[Result<T, LockError>]) -> bool,
    ) -> Vec<Result<T, LockError>> {
        if let [conn] = self.nodes.as_slice() {
            // One server: one call, nothing to share with other nodes' calls.
            let mut conn = conn.clone();
            let timeout = self.node_timeout(lease);
            return vec![bounded(name, timeout, call.invoke_async(&mut conn)).await];
        }
        let mut calls = self.eval_stream(name, lease, call);
        let mut answers = Vec::with_capacity(self.nodes.len());
        while let Some(answer) = calls.next().await {
            answers.push(answer);
            if decided(&answers) {
                break;
            }
        }
        if !calls.is_empty() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { while calls.next().await.is_some() {} });
            }
        }
        answers
    }

    /// One script call on every node at once, each within the node timeout: the answers
    /// as they arrive, owning all they need (`eval_until` may leave them to a task).
    fn eval_stream<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
    ) -> FuturesUnordered<impl Future<Output = Result<T, LockError>> + Send + 'static> {
        let (call, timeout) = (Arc::new(call), self.node_timeout(lease));
        let on = |conn: &Conn| {
            let (mut conn, name, call) = (conn.clone(), name.clone(), Arc::clone(&call));
            async move { bounded(&name, timeout, call.invoke_async(&mut conn)).await }
        };
        self.nodes.iter().map(on).collect()
    }
}
