//! The guard of a multi-lock: every name's guard, released in reverse order.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::LockError;
use crate::lock::current_lock::LockInfo;
use crate::lock::guard::{LockGuard, Lost};
use crate::lock::guarded_run::Guarded;
use crate::protocol::name::LockName;

/// Releases `guards` last first: the releases start in that order and are in flight
/// together (on one connection Redis runs them in that order), so the caller waits one
/// round trip. Errors are logged (each such lock expires with its lease).
pub(super) async fn release_reversed(guards: Vec<LockGuard>) -> Option<LockError> {
    let engine = Arc::clone(&guards.first()?.held().engine);
    let releases = guards.into_iter().rev().map(LockGuard::release);
    let mut first_error = None;
    for result in futures_util::future::join_all(releases).await {
        if let Err(error) = result {
            (engine.health).log_failure(&error, "releasing a multi-lock's name failed");
            first_error.get_or_insert(error);
        }
    }
    first_error
}

/// Proof that every name of a [`MultiLockRequest`](crate::MultiLockRequest) is held: one [`LockGuard`] per distinct
/// name, in the order they were taken. When every name was free, they were all taken in
/// one function call (on one server, or names of one Cluster slot). Dropping it releases them all in the background;
/// [`release`](Self::release) releases them in reverse order and reports the outcome.
#[must_use = "dropping the guard releases the locks at once"]
pub struct MultiLockGuard {
    /// In acquisition (key) order.
    pub(super) guards: Vec<LockGuard>,
    /// Where the first name the caller gave is in `guards`.
    pub(super) first_given: usize,
}

impl MultiLockGuard {
    /// The guards, one per distinct name, in the order the names were taken.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The fencing token of `name`'s hold, if `name` is one of the locks.
    pub fn fencing_token(&self, name: impl Into<LockName>) -> Option<u64> {
        let name = name.into();
        self.guards
            .iter()
            .find(|g| *g.name() == name)
            .map(LockGuard::fencing_token)
    }

    /// Each name with its fencing token, in the order the names were taken.
    pub fn tokens(&self) -> impl Iterator<Item = (&LockName, u64)> {
        self.guards.iter().map(|g| (g.name(), g.fencing_token()))
    }

    /// True while every lock can be assumed held (see [`LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// A future that resolves when any of the locks can no longer be assumed held (see
    /// [`LockGuard::lost`]).
    ///
    /// # Cancel safety
    /// Dropping the future has no effect on the locks.
    pub fn lost(&self) -> MultiLost {
        MultiLost {
            lost: self.guards.iter().map(|g| Box::pin(g.lost())).collect(),
        }
    }

    /// The [`LockError::Lost`] of the first lock that is no longer held (or of the first
    /// lock, if all still are).
    pub fn lost_error(&self) -> LockError {
        let gone = self.guards.iter().find(|g| !g.is_held());
        gone.unwrap_or(&self.guards[0]).lost_error()
    }

    /// Extends every lock's remaining lease to at least `lease` (see
    /// [`LockGuard::extend`]).
    ///
    /// # Errors
    /// The first error of [`LockGuard::extend`]; every lock is tried.
    ///
    /// # Cancel safety
    /// Dropping the future leaves each lease either extended or as it was.
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let results = futures_util::future::join_all(self.guards.iter().map(|g| g.extend(lease)));
        results.await.into_iter().collect()
    }

    /// Releases the locks in reverse order of acquisition.
    ///
    /// # Errors
    /// The first error of [`LockGuard::release`]; every lock is released regardless.
    ///
    /// # Cancel safety
    /// Dropping the future releases the locks not yet released in the background.
    pub async fn release(self) -> Result<(), LockError> {
        match release_reversed(self.guards).await {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl crate::lock::guarded_run::sealed::Sealed for MultiLockGuard {}

impl Guarded for MultiLockGuard {
    type Lost = MultiLost;
    // A multi-lock releases several names at once; one box per run is its price.
    type Release = futures_util::future::BoxFuture<'static, Result<(), LockError>>;

    fn lost(&self) -> MultiLost {
        MultiLockGuard::lost(self)
    }

    fn lost_error(&self) -> LockError {
        MultiLockGuard::lost_error(self)
    }

    /// The first name the caller gave.
    fn info(&self) -> LockInfo {
        self.guards[self.first_given].info()
    }

    fn release(self) -> Self::Release {
        Box::pin(MultiLockGuard::release(self))
    }

    fn reachable(&self) -> bool {
        self.guards.iter().all(Guarded::reachable)
    }

    fn names(&self) -> bool {
        self.guards.iter().any(Guarded::names)
    }
}

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("guards", &self.guards)
            .finish()
    }
}

/// The future of [`MultiLockGuard::lost`]: resolves when any of the locks is lost.
#[must_use = "futures do nothing unless polled"]
pub struct MultiLost {
    lost: Vec<Pin<Box<Lost>>>,
}

impl Future for MultiLost {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        for lost in &mut self.lost {
            if lost.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

impl fmt::Debug for MultiLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLost")
            .field("locks", &self.lost.len())
            .finish()
    }
}
