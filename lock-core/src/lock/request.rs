//! A request for one lock: its options, and the ways to take it.

use std::borrow::Cow;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use tracing::Instrument;

use crate::client::handle::LockClient;
use crate::error::LockError;
use crate::lock::acquire;
use crate::lock::guard::LockGuard;
use crate::lock::guarded::run_under;
use crate::lock::scope::scope;
use crate::metrics::{Family, DEFAULT_FAMILY};
use crate::protocol::mode::LockMode;
use crate::protocol::name::LockName;

/// What [`LockRequest::run`] does with the guarded work when the lock is lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the work at its next `.await` and return [`LockError::Lost`] (the default).
    #[default]
    Abort,
    /// Let the work run on; the loss is only logged.
    Continue,
}

/// A request for one hold of one name: the lock ([`LockClient::lock`]), a side of a
/// read-write lock ([`LockClient::read_lock`], [`LockClient::write_lock`]) or a semaphore's
/// permit ([`LockClient::semaphore`]).
///
/// `.await` it to acquire, waiting up to the wait; [`try_acquire`](Self::try_acquire) tries
/// once; [`run`](Self::run) runs a future under the lock.
#[must_use = "a lock request does nothing until awaited"]
pub struct LockRequest {
    pub(crate) client: LockClient,
    pub(crate) name: LockName,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) family: Family,
    pub(crate) request_id: Option<String>,
    pub(crate) mode: LockMode,
    /// A semaphore's capacity as this caller sees it (1 for the other modes).
    pub(crate) permits: u32,
    on_lost: OnLost,
}

impl fmt::Debug for LockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRequest")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("on_lost", &self.on_lost)
            .field("family", &self.family)
            .field("request_id", &self.request_id)
            .finish()
    }
}

impl LockRequest {
    pub(crate) fn new(client: LockClient, name: LockName, mode: LockMode) -> Self {
        let wait = client.inner.config.wait;
        Self {
            client,
            name,
            lease: None,
            wait,
            family: Cow::Borrowed(DEFAULT_FAMILY),
            request_id: None,
            mode,
            permits: 1,
            on_lost: OnLost::Abort,
        }
    }

    pub(crate) fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// An explicit lease: the lock expires after `lease` unless extended, and the watchdog
    /// does not renew it (as Redisson's `lock(leaseTime, unit)`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Waits at most `wait` for a busy lock; `Duration::ZERO` tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Waits for a busy lock without limit.
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// The metrics label of this lock: the key template its name was made from (e.g.
    /// `"item_<id>"`), never the name itself, so the number of series stays bounded.
    /// `#[distributed_lock]` and `lock-tower` set it to their template.
    ///
    /// # Default
    /// `"default"`.
    pub fn family(mut self, family: impl Into<Cow<'static, str>>) -> Self {
        self.family = family.into();
        self
    }

    /// A request id recorded with the hold, for operators (see
    /// [`HolderInfo::request_id`](crate::HolderInfo::request_id)).
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// What [`run`](Self::run) does when the lock is lost; [`OnLost::Abort`] by default.
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Acquires the lock, waiting up to the wait. A waiter is woken by the holder's release
    /// message and, should that be missed, by the holder's remaining TTL.
    ///
    /// # Errors
    /// [`LockError::WaitTimeout`] when it stayed busy; [`LockError::Unavailable`] or
    /// [`LockError::Timeout`] when Redis cannot be reached (within the wait plus the command
    /// timeout); [`LockError::NotReplicated`] when the client requires replica
    /// acknowledgements and too few came; [`LockError::Refused`] when Redis refuses the
    /// command (the name collides with a key that is not a lock, say);
    /// [`LockError::InvalidName`], [`LockError::InvalidRequest`] for bad input;
    /// [`LockError::Lost`] when re-entering a lock this scope has lost.
    ///
    /// # Cancel safety
    /// Dropping the future at any point leaves no lock held: an acquisition whose answer was
    /// not seen is undone in the background.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        self.into_future().await
    }

    /// Tries once: `Ok(None)` when another owner holds the lock.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), except that a busy lock is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        match self.wait(Duration::ZERO).acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::WaitTimeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `fut` under the lock inside a reentrancy [`scope`], then releases the lock —
    /// also when `fut` panics or this future is dropped. While `fut` runs,
    /// [`current_lock`](crate::current_lock) returns the lock's name and fencing token.
    ///
    /// With [`OnLost::Abort`], `fut` is dropped at its next `.await` once the lock is lost,
    /// and [`LockError::Lost`] is returned — also when the loss shows only as `fut`
    /// completes or at the release (the lock was no longer held there). Any other failure
    /// to release after `fut` completed is logged, not returned: the work is done and its
    /// output is more useful to the caller.
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire), and [`LockError::Lost`].
    ///
    /// # Cancel safety
    /// Dropping this future drops `fut` and releases the lock in the background.
    pub async fn run<F: Future>(self, fut: F) -> Result<F::Output, LockError> {
        let on_lost = self.on_lost;
        scope(async move { run_under(self.acquire().await?, on_lost, fut).await }).await
    }
}

impl IntoFuture for LockRequest {
    type Output = Result<LockGuard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// The acquisition as one boxed future (as [`acquire`](LockRequest::acquire)): the
    /// only allocation of taking a lock besides Redis' own, nameable so that middleware can
    /// keep it as a field.
    fn into_future(self) -> Self::IntoFuture {
        let span = tracing::debug_span!("distlock.acquire", lock = %self.name);
        // Boxed: the acquisition state machine is large, and callers nest it in their own.
        Box::pin(acquire::acquire(self).instrument(span))
    }
}
