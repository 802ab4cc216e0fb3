//! A leader's term: the guard that [`Election::campaign`](crate::election::Election::campaign)
//! returns.

use crate::error::LockError;
use crate::lock::guard::{LockGuard, Lost};
use crate::protocol::fleet;
use crate::protocol::name::LockName;

/// This instance leads the election while it holds this: owned, `'static`, `Send`.
///
/// The watchdog renews the term; [`lost`](Self::lost) resolves when it ends for any reason
/// (a renewal found it gone, its lease ran out unanswered — a paused process —, or it was
/// resigned). Guard the leader's writes with [`fencing_token`](Self::fencing_token): a
/// leader that was paused past its lease and resumes still believes it leads until its
/// next renewal, and only the token lets the resource refuse it.
///
/// Dropping it resigns in the background; [`resign`](Self::resign) does so and reports the
/// outcome. Followers waiting in [`campaign`](crate::election::Election::campaign) take over at once.
#[must_use = "dropping the leadership resigns at once"]
#[derive(Debug)]
pub struct Leadership {
    guard: LockGuard,
    value: Option<String>,
}

impl Leadership {
    pub(crate) fn new(guard: LockGuard, value: Option<String>) -> Self {
        Self { guard, value }
    }

    /// The election's name.
    pub fn name(&self) -> &LockName {
        self.guard.name()
    }

    /// The term's fencing token: greater than every earlier term's.
    pub fn fencing_token(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// The value this leader proclaims, if any.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// True while the term can be assumed to go on (see [`LockGuard::is_held`]).
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// A future that resolves when the term ends (see [`LockGuard::lost`]).
    ///
    /// # Cancel safety
    /// Dropping it has no effect on the term.
    pub fn lost(&self) -> Lost {
        self.guard.lost()
    }

    /// The [`LockError::Lost`] of this term.
    pub fn lost_error(&self) -> LockError {
        self.guard.lost_error()
    }

    /// The term's lock guard (to [`extend`](LockGuard::extend) it, say).
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Proclaims `value` (`None`, or an empty string, withdraws it) for the rest of the
    /// term; observers see the change.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the term has ended; [`LockError::InvalidRequest`] for a
    /// value above [`Election::MAX_VALUE`](crate::election::Election::MAX_VALUE) bytes; the Redis
    /// errors.
    ///
    /// # Cancel safety
    /// Dropped after the call was sent, the value may or may not have changed.
    pub async fn proclaim(&mut self, value: Option<String>) -> Result<(), LockError> {
        let value = value.filter(|v| !v.is_empty());
        crate::election::handle::check_value(self.name(), value.as_deref())?;
        proclaim(&self.guard, value.as_deref()).await?;
        self.value = value;
        Ok(())
    }

    /// Ends the term now: the lock is released and a waiting follower takes over at once.
    ///
    /// # Errors
    /// As [`LockGuard::release`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::release`]: the resignation goes on in the background.
    pub async fn resign(self) -> Result<(), LockError> {
        self.guard.release().await
    }
}

/// Announces `guard`'s term with `value` on the lock's channel.
///
/// # Errors
/// [`LockError::Lost`] when `guard` no longer holds the lock; the Redis errors.
pub(crate) async fn proclaim(guard: &LockGuard, value: Option<&str>) -> Result<(), LockError> {
    let held = guard.held();
    let publish = held.engine.config.publish;
    let (keys, owner) = (&held.identity.keys, &held.identity.owner);
    let call = fleet::proclaim(keys, owner, value.unwrap_or(""), publish);
    let answer = (held.engine)
        .call_each(&held.name, held.identity.lease, call)
        .await
        .into_iter()
        .next()
        .expect("one node answers once")?;
    if answer == 1 {
        Ok(())
    } else {
        held.mark_lost("the term was over when its value was proclaimed");
        Err(guard.lost_error())
    }
}
