//! The replica acknowledgement setting: whether an acquisition waits until replicas have the
//! hold before it returns, as Redisson's `checkLockSyncedSlaves` does.

use std::time::Duration;

/// Whether an acquisition waits (Redis `WAIT`) until replicas of the master that granted it
/// have the hold, so that a failover right after it does not grant the lock again on a
/// promoted replica that never saw it. Set with
/// [`LockClientBuilder::replica_ack`](crate::LockClientBuilder::replica_ack).
///
/// When fewer replicas than required acknowledge in time, the hold is released again and
/// the acquisition fails with [`LockError::NotReplicated`](crate::LockError::NotReplicated).
/// Renewals are not waited for. Replication stays asynchronous and `WAIT` is no consensus:
/// this narrows the failover window, it does not close it (see SAFETY.md).
///
/// Redlock keeps its own rule (a majority of independent masters):
/// [`Auto`](Self::Auto) does nothing there, and [`Require`](Self::Require) is refused.
///
/// ```no_run
/// # fn demo() -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// use lock_core::{LockClient, ReplicaAck};
///
/// // Two replicas must have every hold within 3 s, whatever the master reports.
/// let strict = LockClient::builder("redis://10.0.0.5:6379")
///     .replica_ack(ReplicaAck::Require { replicas: 2, timeout: Duration::from_secs(3) })
///     .build()?;
/// // Never wait (the default of earlier releases).
/// let fast = LockClient::builder("redis://10.0.0.5:6379")
///     .replica_ack(ReplicaAck::Off)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaAck {
    /// Waits for one replica, for at most `timeout`, when the master serving the lock has a
    /// replica online; where it has none, nothing is waited for and no call is added.
    ///
    /// The client learns which masters have replicas when it connects and again when its
    /// topology changes (a reconnection, a master the Sentinels name anew), and after an
    /// acquisition was refused for want of one — never on each acquisition. On a Cluster it
    /// reads the replicas of every shard from `CLUSTER SLOTS` (replicas the Cluster has not
    /// marked failed); elsewhere it asks the master, on a connection of its own, how many
    /// replicas are online (`WAIT 0 0`).
    ///
    /// [`ReplicaAck::default()`] is this with [`DEFAULT_TIMEOUT`](Self::DEFAULT_TIMEOUT).
    Auto {
        /// The longest an acquisition waits for the replica.
        timeout: Duration,
    },
    /// Waits for `replicas` replicas, for at most `timeout`, after every acquisition,
    /// whatever the master reports: with fewer replicas online every acquisition fails.
    Require {
        /// Replicas that must acknowledge the hold (at least 1).
        replicas: usize,
        /// The longest an acquisition waits for them.
        timeout: Duration,
    },
    /// Never waits for replicas: a failover right after an acquisition can grant the lock
    /// twice (see SAFETY.md).
    Off,
}

impl ReplicaAck {
    /// How long [`ReplicaAck::default()`] waits for a replica: Redisson's `slavesSyncTimeout`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
}

impl Default for ReplicaAck {
    /// [`Auto`](Self::Auto) with [`DEFAULT_TIMEOUT`](Self::DEFAULT_TIMEOUT).
    fn default() -> Self {
        Self::Auto {
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}
