//! `hold_at_least`: when a job ends before its minimum hold, the lock is not deleted but
//! left to expire at start + minimum, owner-checked (LINGER), so a skewed instance's fire
//! of the same schedule still finds it held. The lock keeps Redisson's layout and a TTL.

use std::sync::Arc;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lock::current_lock::LockInfo;
use crate::lock::guard::{LockGuard, Lost};
use crate::lock::guarded_run::Guarded;
use crate::lock::held::finish_in_background;
use crate::observe;
use crate::protocol::fleet;

/// Below this much left, a lingering release is an ordinary one.
const MIN_LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// A job's hold that, however it ends (release, error, panic, cancellation), keeps the lock
/// until `until`.
pub(crate) struct Lingering {
    guard: Option<LockGuard>,
    until: Instant,
}

impl Lingering {
    pub(crate) fn new(guard: LockGuard, until: Instant) -> Self {
        Self {
            guard: Some(guard),
            until,
        }
    }

    fn guard(&self) -> &LockGuard {
        self.guard
            .as_ref()
            .expect("present until released or dropped")
    }
}

impl crate::lock::guarded_run::sealed::Sealed for Lingering {}

impl Guarded for Lingering {
    type Lost = Lost;
    // LINGER or an ordinary release, decided when the work ends.
    type Release = futures_util::future::BoxFuture<'static, Result<(), LockError>>;

    fn lost(&self) -> Lost {
        self.guard().lost()
    }

    fn lost_error(&self) -> LockError {
        self.guard().lost_error()
    }

    fn info(&self) -> LockInfo {
        self.guard().info()
    }

    fn reachable(&self) -> bool {
        self.guard().reachable()
    }

    fn names(&self) -> bool {
        self.guard().names()
    }

    fn release(mut self) -> Self::Release {
        let guard = self.guard.take().expect("released once");
        Box::pin(release_at(guard, self.until))
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        // Dropped with the work (a loss, a panic, a cancelled future): linger all the same.
        if let Some(guard) = self.guard.take() {
            let (client, name) = (Arc::clone(&guard.held().engine), guard.name().clone());
            finish_in_background(client, name, release_at(guard, self.until));
        }
    }
}

/// Releases `guard`'s hold so that the lock lasts until `until`: an ordinary release when
/// that moment has passed, else LINGER on every node.
///
/// # Errors
/// [`LockError::NotHeld`] when the nodes that answered no longer had this hold; the Redis
/// error when none answered (the lock then expires with its lease).
pub(crate) async fn release_at(guard: LockGuard, until: Instant) -> Result<(), LockError> {
    let remaining = until.saturating_duration_since(Instant::now());
    if remaining < MIN_LINGER {
        return guard.release().await;
    }
    // An inner hold of a reentrancy scope: the outermost decides.
    let Some(held) = guard.into_outermost() else {
        return Ok(());
    };
    if !held.end_locally() {
        return Ok(());
    }
    let call = fleet::linger(&held.identity.keys, &held.identity.owner, remaining);
    let kept = |answers: &[Result<i64, LockError>]| answers.iter().any(|a| matches!(a, Ok(1)));
    let answers = (held.engine)
        .call_until(&held.name, held.identity.lease, call, kept)
        .await;
    let names = held.engine.config.trace_names;
    tracing::debug!(distlock.lock.template = &*held.identity.label,
        distlock.lock.name = observe::name(&held.name, names), owner = %held.identity.owner,
        ?remaining, "lingering");
    if kept(&answers) {
        return Ok(());
    }
    Err(held.not_released(answers))
}
