//! The client's builder: every setting with its default and setter, validation, and
//! `build`.

use std::time::Duration;

use crate::client::handle::LockClient;
use crate::client::replica_ack::ReplicaAck;
use crate::error::LockError;
use crate::lock::config::{self, check_lease, Config};
use crate::protocol::holder::HolderConfig;
use crate::protocol::messages::Publish;
use crate::transport::connect::{Tls, Topology};

/// Builds a [`LockClient`](crate::LockClient). Every setting has a documented default.
///
/// ```no_run
/// # async fn demo() -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// let client = lock_core::LockClient::builder("redis://127.0.0.1:6379")
///     .key_prefix("shop:locks:")
///     .lease(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LockClientBuilder {
    pub(crate) topology: Topology,
    pub(crate) config: Config,
    /// Certificates for `rediss://` (none without the `tls` feature).
    pub(crate) tls: Option<Tls>,
    watchdog_interval: Option<Duration>,
}

impl LockClientBuilder {
    /// Default key prefix: keeps lock keys apart from the application's own keys.
    pub const DEFAULT_KEY_PREFIX: &'static str = "distlock:";
    /// Default lease of a lock taken without an explicit lease (renewed by the watchdog).
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
    /// Default time an acquisition waits for a busy lock.
    pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
    /// Default bound on one Redis command, including reconnecting.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default bound on establishing one connection.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default longest lock name, in bytes.
    pub const DEFAULT_MAX_NAME_LEN: usize = 1024;
    /// Shortest lease accepted: below this, clock drift and round trips eat the lease.
    pub const MIN_LEASE: Duration = config::MIN_LEASE;
    /// Longest lease accepted (a year): a lock meant to outlive its holder's crash by more
    /// than that is a configuration mistake, and the local deadlines stay exact below it.
    pub const MAX_LEASE: Duration = config::MAX_LEASE;

    pub(crate) fn new(topology: Topology) -> Self {
        Self {
            topology,
            config: Config {
                key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
                lease: Self::DEFAULT_LEASE,
                watchdog_interval: Self::DEFAULT_LEASE / 3,
                wait: Some(Self::DEFAULT_WAIT),
                command_timeout: Self::DEFAULT_COMMAND_TIMEOUT,
                connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
                max_name_len: Self::DEFAULT_MAX_NAME_LEN,
                max_hold: None,
                replica_ack: ReplicaAck::default(),
                holder: HolderConfig::default(),
                trace_names: false,
                #[cfg(feature = "cluster")]
                sharded_pubsub: true,
                publish: Publish::Plain,
            },
            tls: None,
            watchdog_interval: None,
        }
    }

    /// Trusts this root certificate (PEM) for `rediss://` instead of the bundled web roots:
    /// for Redis servers with a private CA.
    ///
    /// Available with the crate feature `tls`.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.get_or_insert_with(empty_tls).root_cert = Some(pem.into());
        self
    }

    /// Presents this client certificate and key (PEM) for mutual TLS.
    ///
    /// Available with the crate feature `tls`.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.get_or_insert_with(empty_tls).client_tls = Some(redis::ClientTlsConfig {
            client_cert: cert_pem.into(),
            client_key: key_pem.into(),
        });
        self
    }

    /// Prefix put before every lock name (no braces or control characters).
    ///
    /// # Default
    /// [`DEFAULT_KEY_PREFIX`](Self::DEFAULT_KEY_PREFIX). Use `""` to share locks with Redisson
    /// clients that call `getLock(name)` with the bare name.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// Lease of locks taken without an explicit lease; the watchdog keeps renewing it.
    ///
    /// Keep it well above the longest write stall your Redis can have: a planned failover
    /// pauses writes on the master (up to 5 s when it goes wrong, see SAFETY.md), and a lock
    /// whose renewals wait longer than its lease expires.
    ///
    /// # Default
    /// [`DEFAULT_LEASE`](Self::DEFAULT_LEASE) (30 s, as Redisson's `lockWatchdogTimeout`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How often the watchdog renews held locks.
    ///
    /// # Default
    /// A third of the lease.
    pub fn watchdog_interval(mut self, interval: Duration) -> Self {
        self.watchdog_interval = Some(interval);
        self
    }

    /// How long an acquisition waits for a busy lock unless the request says otherwise.
    ///
    /// # Default
    /// [`DEFAULT_WAIT`](Self::DEFAULT_WAIT).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = Some(wait);
        self
    }

    /// Puts each lock's name on its spans and log events, as `distlock.lock.name` (see the
    /// operating guide's "Tracing"), and a lock error's text (which begins with the name)
    /// on the events that report one. Names are as many as the things locked (an order id,
    /// a user id): a tracing backend that indexes attributes pays for each, and a name may
    /// carry data the traces should not. Without it, no span or event of this client (nor
    /// of lock-tower's layers over it) names a lock: they carry the metrics label
    /// ([`LockRequest::metrics_label`](crate::LockRequest::metrics_label)), the key template
    /// the name was made from, as the metrics do, and an error's
    /// [class](crate::LockError::class).
    ///
    /// # Default
    /// `false`.
    pub fn trace_lock_names(mut self, on: bool) -> Self {
        self.config.trace_names = on;
        self
    }

    /// Makes acquisitions wait without limit unless the request bounds them (Redisson's `lock()`).
    pub fn wait_forever(mut self) -> Self {
        self.config.wait = None;
        self
    }

    /// Bound on one Redis command, reconnecting included; an acquisition with Redis
    /// unreachable fails with [`LockError::Timeout`] or [`LockError::Unavailable`] within
    /// its wait plus this.
    ///
    /// # Default
    /// [`DEFAULT_COMMAND_TIMEOUT`](Self::DEFAULT_COMMAND_TIMEOUT).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }

    /// Bound on establishing one connection.
    ///
    /// # Default
    /// [`DEFAULT_CONNECT_TIMEOUT`](Self::DEFAULT_CONNECT_TIMEOUT).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Longest lock name accepted, in bytes.
    ///
    /// # Default
    /// [`DEFAULT_MAX_NAME_LEN`](Self::DEFAULT_MAX_NAME_LEN).
    pub fn max_name_len(mut self, len: usize) -> Self {
        self.config.max_name_len = len;
        self
    }

    /// Stops renewing a watchdog lock after it has been held this long, so a stuck holder
    /// cannot keep a lock forever; its guard then reports the lock lost when the lease ends.
    ///
    /// # Default
    /// None: renewed for as long as the guard lives.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.config.max_hold = Some(max_hold);
        self
    }

    /// Whether an acquisition waits until replicas have the hold before it returns (Redis
    /// `WAIT`): see [`ReplicaAck`] for each setting. With fewer acknowledgements in time
    /// the hold is released again and the acquisition fails with
    /// [`LockError::NotReplicated`]. Renewals are not waited for.
    ///
    /// Every acquisition waits the same way: locks, read-write locks, semaphores, multi-locks
    /// (one `WAIT` for all their names), jobs, election campaigns, idempotency keys and
    /// lock-tower's layers. Redlock keeps its own rule: there [`ReplicaAck::Auto`] does
    /// nothing and [`ReplicaAck::Require`] is refused.
    ///
    /// # Default
    /// [`ReplicaAck::default()`]: one replica within 1 s
    /// ([`ReplicaAck::DEFAULT_TIMEOUT`]) where the master serving the lock has a replica
    /// online, as Redisson's `checkLockSyncedSlaves`; nothing where it has none.
    pub fn replica_ack(mut self, ack: ReplicaAck) -> Self {
        self.config.replica_ack = ack;
        self
    }

    /// After each acquisition, waits until at least `replicas` replicas have it, for at
    /// most `timeout`: [`replica_ack`](Self::replica_ack) with [`ReplicaAck::Require`], or
    /// with [`ReplicaAck::Off`] for 0 replicas.
    #[deprecated(
        note = "use `replica_ack(ReplicaAck::Require { replicas, timeout })` (or `ReplicaAck::Off` for 0)"
    )]
    pub fn min_replicas(self, replicas: usize, timeout: Duration) -> Self {
        self.replica_ack(match replicas {
            0 => ReplicaAck::Off,
            replicas => ReplicaAck::Require { replicas, timeout },
        })
    }

    /// On a Redis Cluster, publish release messages with `SPUBLISH` and listen with
    /// `SSUBSCRIBE` (sharded pub/sub, Redis 7.0+): a message then travels within the lock's
    /// shard instead of to every node, and Redisson 3.23+ clients on the same Cluster, which
    /// use sharded pub/sub there, wake on distlock's releases and distlock on theirs. Turn it
    /// off for a Cluster older than 7.0, or to share locks with Redisson clients configured
    /// with `ShardedSubscriptionMode.OFF`. Ignored by the other topologies.
    ///
    /// # Default
    /// `true`.
    ///
    /// Available with the crate feature `cluster`.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn sharded_pubsub(mut self, sharded: bool) -> Self {
        self.config.sharded_pubsub = sharded;
        self
    }

    // Holder metadata (see [`HolderInfo`](crate::HolderInfo)).

    /// The service name recorded with every lock this client takes, shown by
    /// [`LockClient::inspect`](crate::LockClient::inspect), the `distlock` CLI and in
    /// [`LockError::WaitTimeout`](crate::LockError::WaitTimeout) messages of other clients.
    ///
    /// # Default
    /// `$DISTLOCK_SERVICE`, else the executable's file name.
    pub fn service_name(mut self, service: impl Into<String>) -> Self {
        self.config.holder.service = service.into();
        self
    }

    /// The host name recorded with every lock this client takes.
    ///
    /// # Default
    /// `$HOSTNAME`, else the kernel's host name, else `unknown`.
    pub fn holder_host(mut self, host: impl Into<String>) -> Self {
        self.config.holder.host = host.into();
        self
    }

    /// Whether this client records holder metadata at all.
    ///
    /// # Default
    /// `true`. The record costs one small string per held lock, written by the library's
    /// functions that take, renew and release the lock (no extra round trip).
    pub fn record_holder(mut self, record: bool) -> Self {
        self.config.holder.enabled = record;
        self
    }

    /// Checks the settings and creates the client. Connections are made lazily, so a Redis
    /// that is not up yet does not fail start-up; the first lock call reports it.
    ///
    /// `redis://`, `rediss://` (TLS, with the `tls` feature) and `redis://user:password@host`
    /// (ACL) URLs work.
    ///
    /// # Errors
    /// [`LockError::InvalidConfig`] for a bad setting or URL (a `rediss://` URL without the
    /// `tls` feature, say), or when called outside a Tokio runtime (the client runs
    /// background tasks).
    pub fn build(self) -> Result<LockClient, LockError> {
        let config = self.validated()?;
        LockClient::start(&self.topology, self.tls.as_ref(), config)
    }

    /// Checks every setting and returns the final configuration.
    pub(crate) fn validated(&self) -> Result<Config, LockError> {
        let mut config = self.config.clone();
        check_lease(config.lease).map_err(LockError::invalid_config)?;
        config.watchdog_interval = self.watchdog_interval.unwrap_or(config.lease / 3);
        if config.watchdog_interval.is_zero() || config.watchdog_interval >= config.lease {
            return Err(LockError::invalid_config(format!(
                "watchdog_interval {:?} must be above zero and below the lease {:?}",
                config.watchdog_interval, config.lease
            )));
        }
        for (what, d) in [
            ("command_timeout", config.command_timeout),
            ("connect_timeout", config.connect_timeout),
        ] {
            if d.is_zero() {
                return Err(LockError::invalid_config(format!(
                    "{what} must be above zero"
                )));
            }
        }
        match &self.topology {
            #[cfg(feature = "cluster")]
            Topology::Cluster(seeds) if seeds.is_empty() => {
                return Err(LockError::invalid_config(
                    "a cluster needs at least one seed node",
                ));
            }
            #[cfg(feature = "sentinel")]
            Topology::Sentinel { sentinels, .. } if sentinels.is_empty() => {
                return Err(LockError::invalid_config(
                    "sentinel needs at least one sentinel",
                ));
            }
            Topology::Redlock(nodes) if nodes.is_empty() => {
                return Err(LockError::invalid_config("redlock needs at least one node"));
            }
            Topology::Redlock(_) if matches!(config.replica_ack, ReplicaAck::Require { .. }) => {
                return Err(LockError::invalid_config(
                    "replica_ack(Require) does not apply to redlock: its nodes are independent \
                     masters",
                ));
            }
            _ => {}
        }
        if let ReplicaAck::Require { replicas: 0, .. } = config.replica_ack {
            return Err(LockError::invalid_config(
                "replica_ack(Require) needs at least one replica: ReplicaAck::Off waits for none",
            ));
        }
        config.publish = Publish::Plain;
        #[cfg(feature = "cluster")]
        if config.sharded_pubsub && matches!(self.topology, Topology::Cluster(_)) {
            config.publish = Publish::Sharded;
        }
        if config.max_name_len == 0 {
            return Err(LockError::invalid_config("max_name_len must be above zero"));
        }
        if let Some(bad) = config
            .key_prefix
            .chars()
            .find(|c| matches!(c, '{' | '}' | '%') || c.is_control())
        {
            return Err(LockError::invalid_config(format!(
                "key_prefix {:?} must not contain {bad:?}: the library owns the hash tag",
                config.key_prefix
            )));
        }
        Ok(config)
    }
}

#[cfg(feature = "tls")]
fn empty_tls() -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> LockClientBuilder {
        LockClientBuilder::new(Topology::Single("redis://127.0.0.1".into()))
    }

    #[test]
    fn defaults_follow_redisson() {
        let c = builder().validated().unwrap();
        assert_eq!(c.lease, Duration::from_secs(30));
        assert_eq!(c.watchdog_interval, Duration::from_secs(10));
    }

    #[test]
    fn replicas_are_waited_for_by_default_where_there_are_some() {
        let c = builder().validated().unwrap();
        let timeout = Duration::from_secs(1);
        assert_eq!(c.replica_ack, ReplicaAck::Auto { timeout });
        assert_eq!(ReplicaAck::default(), ReplicaAck::Auto { timeout });
        let redlock = LockClientBuilder::new(Topology::Redlock(vec!["redis://a".into()]));
        // Redlock keeps its own rule: the default applies nothing there, and is accepted.
        assert!(redlock.clone().validated().is_ok());
        let require = ReplicaAck::Require {
            replicas: 1,
            timeout,
        };
        let err = redlock.replica_ack(require).validated().unwrap_err();
        assert!(err.to_string().contains("redlock"), "{err}");
        let none = ReplicaAck::Require {
            replicas: 0,
            timeout,
        };
        let err = builder().replica_ack(none).validated().unwrap_err();
        assert!(err.to_string().contains("ReplicaAck::Off"), "{err}");
    }

    #[test]
    #[allow(deprecated)]
    fn min_replicas_is_require_or_off() {
        let t = Duration::from_millis(500);
        let c = builder().min_replicas(2, t).validated().unwrap();
        let require = ReplicaAck::Require {
            replicas: 2,
            timeout: t,
        };
        assert_eq!(c.replica_ack, require);
        let c = builder().min_replicas(0, t).validated().unwrap();
        assert_eq!(c.replica_ack, ReplicaAck::Off);
    }

    #[test]
    fn watchdog_interval_follows_the_lease() {
        let c = builder().lease(Duration::from_secs(3)).validated().unwrap();
        assert_eq!(c.watchdog_interval, Duration::from_secs(1));
    }

    #[test]
    fn bad_settings_are_rejected_by_name() {
        let err = builder().lease(Duration::ZERO).validated().unwrap_err();
        assert!(err.to_string().contains("lease 0ns"), "{err}");
        let err = builder()
            .watchdog_interval(Duration::from_secs(40))
            .validated()
            .unwrap_err();
        assert!(err.to_string().contains("watchdog_interval"), "{err}");
        let err = builder().key_prefix("a{b}").validated().unwrap_err();
        assert!(err.to_string().contains("key_prefix"), "{err}");
        let err = builder()
            .command_timeout(Duration::ZERO)
            .validated()
            .unwrap_err();
        assert!(err.to_string().contains("command_timeout"), "{err}");
    }
}
