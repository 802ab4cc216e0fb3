//! The client handle: the public façade over the lock engine ([`Engine`]: connections,
//! settings, the calls to Redis) and the client's holds ([`HoldRegistry`]: renewed by the
//! watchdog task, revoked, shut down together).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client::builder::LockClientBuilder;
use crate::error::LockError;
use crate::lock::config::Config;
use crate::lock::engine::Engine;
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::request::LockRequest;
use crate::lock::watchdog;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;
use crate::transport::connect::{Tls, Topology};

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
    /// What every call to Redis goes through.
    pub(crate) engine: Arc<Engine>,
    /// Every hold taken through this client: renewed, revoked and shut down together.
    pub(crate) holds: Arc<HoldRegistry>,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.engine.fmt(f)
    }
}

impl LockClient {
    /// A builder for a client of one Redis server, with every setting at its default.
    pub fn builder(url: impl Into<String>) -> LockClientBuilder {
        LockClientBuilder::new(Topology::Single(url.into()))
    }

    /// A builder for a client of a Redis Cluster, found through `seeds` (URLs of any nodes).
    /// Lock, waiter queue and release channel of one name always share a slot; commands
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
    ///
    /// Available with the crate feature `cluster`.
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
    /// their next renewal. Acquisitions wait for a replica by default
    /// ([`replica_ack`](LockClientBuilder::replica_ack)), which makes that rarer.
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
    ///
    /// Available with the crate feature `sentinel`.
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
    /// disagree). Fencing tokens are the highest of the granting majority's tokens: see
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
        self.request(name.into(), LockMode::Exclusive)
    }

    /// A request for a hold of `name` of `kind` through this client.
    pub(crate) fn request(&self, name: LockName, kind: LockMode) -> LockRequest {
        let (engine, holds) = (Arc::clone(&self.engine), Arc::clone(&self.holds));
        LockRequest::new(engine, holds, name, kind)
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
        let engine = Engine::start(topology, tls, config)?;
        let holds = Arc::new(HoldRegistry::default());
        watchdog::start(&engine, &holds);
        Ok(Self { engine, holds })
    }

    /// How long a request of this client waits for a busy lock unless it says otherwise
    /// ([`LockClientBuilder::wait`]); `None` waits until the lock is free. The macro and
    /// lock-tower's layer use it too, so one setting governs every wait.
    pub fn default_wait(&self) -> Option<Duration> {
        self.engine.config.wait
    }

    /// True when this client can take holds of `mode`: every kind on one server, a Cluster
    /// or Sentinel; only [`LockMode::Exclusive`] under Redlock (a reader set or a permit
    /// count cannot be voted on node by node: requests for them answer
    /// [`LockError::InvalidRequest`]). Lets a layer or a service refuse a setup at start
    /// rather than on every request.
    pub fn supports(&self, mode: LockMode) -> bool {
        mode.unsupported(1, self.engine.nodes.len()).is_none()
    }

    /// The UUID that starts this client's Redis owner ids.
    pub fn id(&self) -> &str {
        &self.engine.id
    }

    /// True when the client was built with
    /// [`trace_lock_names(true)`](crate::LockClientBuilder::trace_lock_names): what a
    /// middleware over it asks before its own log events name a lock.
    pub fn traces_lock_names(&self) -> bool {
        self.engine.config.trace_names
    }
}
