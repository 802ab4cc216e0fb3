//! Multi-locks: several names taken all-or-nothing, in one global order.
//!
//! Every caller takes the names in the order of their Redis keys, whatever order it gave
//! them in, so two callers that need {a, b} and {b, a} never each hold one and wait for the
//! other: whoever takes the first key in that order takes the rest in turn. Each name is an
//! ordinary lock (queue, hand-off, watchdog, fencing token, Redlock), so a multi-lock and
//! single locks of the same names exclude each other, and a scope that holds one of the
//! names re-enters it.

use std::borrow::Cow;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::handle::LockClient;
use crate::error::LockError;
use crate::lock::guard::{LockGuard, Lost};
use crate::lock::request::{LockRequest, OnLost};
use crate::lock::scope::{scope, with_lock_info};
use crate::protocol::mode::LockMode;
use crate::protocol::name::LockName;

/// A request for several locks at once, made by [`LockClient::lock_all`].
///
/// `.await` it (or [`acquire`](Self::acquire)) for a [`MultiLockGuard`] holding every
/// name; the options are those of [`LockRequest`] and apply to each name, and the wait
/// bounds the whole acquisition.
#[must_use = "a lock request does nothing until awaited"]
pub struct MultiLockRequest {
    client: LockClient,
    /// The names as given (a name given twice is taken once).
    names: Vec<LockName>,
    lease: Option<Duration>,
    wait: Option<Duration>,
    family: Option<Cow<'static, str>>,
    request_id: Option<String>,
    on_lost: OnLost,
}

impl fmt::Debug for MultiLockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockRequest")
            .field("names", &self.names)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("on_lost", &self.on_lost)
            .finish_non_exhaustive()
    }
}

impl MultiLockRequest {
    pub(crate) fn new(client: LockClient, names: Vec<LockName>) -> Self {
        let wait = client.default_wait();
        Self {
            client,
            names,
            lease: None,
            wait,
            family: None,
            request_id: None,
            on_lost: OnLost::Abort,
        }
    }

    /// An explicit lease for every name (see [`LockRequest::lease`]).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Waits at most `wait` for all the names together; `Duration::ZERO` tries each once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Waits without limit.
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// The metrics label of every name (see [`LockRequest::family`]).
    pub fn family(mut self, family: impl Into<Cow<'static, str>>) -> Self {
        self.family = Some(family.into());
        self
    }

    /// A request id recorded with each hold (see [`LockRequest::request_id`]).
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// What [`run`](Self::run) does when one of the locks is lost (see [`OnLost`]).
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Acquires every name, in the order of their Redis keys, waiting up to the wait for
    /// all of them together. On any failure the names already taken are released (and that
    /// release awaited) before the error is returned: nothing stays held.
    ///
    /// # Errors
    /// The errors of [`LockRequest::acquire`] for the first name that could not be taken
    /// ([`LockError::WaitTimeout`] names it); [`LockError::InvalidRequest`] for an empty
    /// list.
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing held: the locks taken so far release as their
    /// guards drop, and the acquisition under way is undone in the background.
    pub async fn acquire(self) -> Result<MultiLockGuard, LockError> {
        self.into_future().await
    }

    /// Tries each name once: `Ok(None)` when one of them is held by another owner (the
    /// others are then released).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), except that a busy name is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(self) -> Result<Option<MultiLockGuard>, LockError> {
        match self.wait(Duration::ZERO).acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::WaitTimeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `fut` under all the locks inside a reentrancy [`scope`], then releases them in
    /// reverse order — also when `fut` panics or this future is dropped. While `fut` runs,
    /// [`current_lock`](crate::current_lock) answers the first name given.
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire), and [`LockError::Lost`] when one of the
    /// locks is lost under [`OnLost::Abort`].
    ///
    /// # Cancel safety
    /// Dropping this future drops `fut` and releases the locks in the background.
    pub async fn run<F: Future>(self, fut: F) -> Result<F::Output, LockError> {
        let on_lost = self.on_lost;
        scope(async move {
            let guard = self.acquire().await?;
            let lost = guard.lost();
            let work = with_lock_info(guard.guards[guard.first_given].info(), fut);
            let output = match on_lost {
                OnLost::Continue => work.await,
                OnLost::Abort => tokio::select! {
                    biased;
                    output = work => output,
                    () = lost => return Err(guard.lost_error()),
                },
            };
            if let Err(error) = guard.release().await {
                tracing::warn!(%error, "release after the guarded work failed");
            }
            Ok(output)
        })
        .await
    }

    /// The request for one name, with this request's options and what is left of the wait.
    fn request_for(&self, name: &LockName, deadline: Option<Instant>) -> LockRequest {
        let mut request = self.client.lock(name);
        if let Some(lease) = self.lease {
            request = request.lease(lease);
        }
        request = match deadline {
            Some(deadline) => request.wait(deadline.saturating_duration_since(Instant::now())),
            None => request.wait_forever(),
        };
        if let Some(family) = &self.family {
            request = request.family(family.clone());
        }
        if let Some(id) = &self.request_id {
            request = request.request_id(id.clone());
        }
        request
    }

    async fn take_all(self) -> Result<MultiLockGuard, LockError> {
        let Some(first) = self.names.first().cloned() else {
            return Err(LockError::InvalidRequest {
                name: LockName::from(""),
                reason: "lock_all needs at least one name".to_owned(),
            });
        };
        let order = self.global_order()?;
        let deadline = self.wait.map(|wait| Instant::now() + wait);
        let mut guards: Vec<LockGuard> = Vec::with_capacity(order.len());
        for name in &order {
            match self.request_for(name, deadline).acquire().await {
                Ok(guard) => guards.push(guard),
                Err(error) => {
                    release_reversed(guards).await;
                    return Err(error);
                }
            }
        }
        let first_given = order.iter().position(|n| *n == first).unwrap_or(0);
        Ok(MultiLockGuard {
            guards,
            first_given,
        })
    }

    /// The distinct names in the order of their Redis keys: one total order for every
    /// client of the same key prefix, so no two callers wait for each other in a cycle.
    fn global_order(&self) -> Result<Vec<LockName>, LockError> {
        let inner = &self.client.inner;
        let mut keyed = Vec::with_capacity(self.names.len());
        for name in &self.names {
            let keys = inner.keys(name, LockMode::Exclusive)?;
            keyed.push((keys.lock().to_vec(), name.clone()));
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.dedup_by(|a, b| a.0 == b.0);
        Ok(keyed.into_iter().map(|(_, name)| name).collect())
    }
}

impl IntoFuture for MultiLockRequest {
    type Output = Result<MultiLockGuard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.take_all())
    }
}

/// Releases `guards` last first, waiting for each; errors are logged (each lock then
/// expires with its lease).
async fn release_reversed(guards: Vec<LockGuard>) -> Option<LockError> {
    let mut first_error = None;
    for guard in guards.into_iter().rev() {
        if let Err(error) = guard.release().await {
            tracing::warn!(%error, "releasing a multi-lock's name failed");
            first_error.get_or_insert(error);
        }
    }
    first_error
}

/// Proof that every name of a [`MultiLockRequest`] is held: one [`LockGuard`] per distinct
/// name, in the order they were taken. Dropping it releases them all in the background;
/// [`release`](Self::release) releases them in reverse order and reports the outcome.
#[must_use = "dropping the guard releases the locks at once"]
pub struct MultiLockGuard {
    /// In acquisition (key) order.
    guards: Vec<LockGuard>,
    /// Where the first name the caller gave is in `guards`.
    first_given: usize,
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
