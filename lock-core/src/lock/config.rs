//! The settings a client runs with, once its builder validated them, and the lease checks
//! shared by the builder and each request.

use std::time::Duration;

use crate::client::replica_ack::ReplicaAck;
use crate::error::LockError;
use crate::protocol::holder::HolderConfig;
use crate::protocol::messages::Publish;
use crate::protocol::name::LockName;

/// Shortest lease accepted (see [`LockClientBuilder::MIN_LEASE`](crate::LockClientBuilder::MIN_LEASE)).
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease accepted (see [`LockClientBuilder::MAX_LEASE`](crate::LockClientBuilder::MAX_LEASE)).
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(86_400 * 365);

/// Validated settings of a [`LockClient`](crate::LockClient).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) key_prefix: String,
    pub(crate) lease: Duration,
    pub(crate) watchdog_interval: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) command_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) max_name_len: usize,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) replica_ack: ReplicaAck,
    pub(crate) holder: HolderConfig,
    /// Lock names as span attributes (`distlock.lock.name`); off: the metrics label only.
    pub(crate) trace_names: bool,
    /// Sharded pub/sub on a Cluster (ignored elsewhere).
    #[cfg(feature = "cluster")]
    pub(crate) sharded_pubsub: bool,
    /// How release messages are published (derived from the topology and the above).
    pub(crate) publish: Publish,
}

/// [`check_lease`] for a lease given to one request (or an extension) of the lock `name`.
pub(crate) fn check_request_lease(name: &LockName, lease: Duration) -> Result<(), LockError> {
    check_lease(lease).map_err(|reason| LockError::InvalidRequest {
        name: name.clone(),
        reason,
    })
}

/// Rejects leases that are zero, too short to be safe, or longer than a year, saying why.
pub(crate) fn check_lease(lease: Duration) -> Result<(), String> {
    let (min, max) = (MIN_LEASE, MAX_LEASE);
    if lease < min {
        return Err(format!(
            "lease {lease:?} is shorter than the minimum {min:?}"
        ));
    }
    if lease > max {
        return Err(format!(
            "lease {lease:?} is longer than the maximum {max:?}"
        ));
    }
    Ok(())
}
