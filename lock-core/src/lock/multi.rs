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

use std::sync::Arc;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lock::acquire::owner_id;
use crate::lock::config::check_request_lease;
use crate::lock::engine::Engine;
use crate::lock::guard::{LockGuard, Lost};
use crate::lock::guarded::{run_under, Guarded};
use crate::lock::held::{Acquired, Held};
use crate::lock::pending::Pending;
use crate::lock::request::{LockRequest, OnLost};
use crate::lock::scope::{next_owner_number, scope, LockInfo, Scope};
use crate::metrics::{self, Family, DEFAULT_FAMILY};
use crate::protocol::kind::EXCLUSIVE;
use crate::protocol::name::{LockKeys, LockName};
use crate::protocol::replies::MultiAcquireReply;
use crate::protocol::scripts;

/// A request for several locks at once, made by [`LockClient::lock_all`](crate::LockClient::lock_all).
///
/// `.await` it (or [`acquire`](Self::acquire)) for a [`MultiLockGuard`] holding every
/// name; the options are those of [`LockRequest`] and apply to each name, and the wait
/// bounds the whole acquisition.
#[must_use = "a lock request does nothing until awaited"]
pub struct MultiLockRequest {
    engine: Arc<Engine>,
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
    pub(crate) fn new(engine: Arc<Engine>, names: Vec<LockName>) -> Self {
        let wait = engine.config.wait;
        Self {
            engine,
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
        scope(async move { run_under(self.acquire().await?, on_lost, fut).await }).await
    }

    /// The request for one name, with this request's options and what is left of the wait.
    fn request_for(&self, name: &LockName, deadline: Option<Instant>) -> LockRequest {
        let mut request = LockRequest::new(Arc::clone(&self.engine), name.clone(), &EXCLUSIVE);
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
        let (order, keys) = self.global_order()?;
        let first_given = order.iter().position(|n| *n == first).unwrap_or(0);
        let deadline = self.wait.map(|wait| Instant::now() + wait);
        if let Some(guards) = at_once(self.at_once_request(&order, keys)?).await? {
            return Ok(MultiLockGuard {
                guards,
                first_given,
            });
        }
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
        Ok(MultiLockGuard {
            guards,
            first_given,
        })
    }

    /// What the uncontended path needs, when it applies: one server or one slot of a
    /// Cluster, not Redlock (names need a majority each), no replica acknowledgement, and
    /// no name already held by the caller's scope (re-entry is the one-by-one path's).
    fn at_once_request(
        &self,
        order: &[LockName],
        keys: Vec<LockKeys>,
    ) -> Result<Option<AtOnce>, LockError> {
        let inner = &self.engine;
        if order.len() < 2 || inner.nodes.len() > 1 || inner.config.min_replicas.is_some() {
            return Ok(None);
        }
        let lease = self.lease.unwrap_or(inner.config.lease);
        check_request_lease(&order[0], lease)?;
        let scope = Scope::current();
        let reentry = scope
            .as_ref()
            .is_some_and(|s| s.holds_any(&inner.id, keys.iter().map(LockKeys::lock)));
        if reentry || !one_slot(inner, &keys) {
            return Ok(None);
        }
        Ok(Some(AtOnce {
            inner: Arc::clone(inner),
            names: order.to_vec(),
            keys,
            lease,
            watchdog: self.lease.is_none(),
            meta: inner.holder_meta(self.request_id.as_deref()).into_owned(),
            family: self.family.clone().unwrap_or(Cow::Borrowed(DEFAULT_FAMILY)),
            scope,
        }))
    }

    /// The distinct names, and their keys, in the order of their Redis keys: one total
    /// order for every client of the same key prefix, so no two callers wait for each other
    /// in a cycle.
    fn global_order(&self) -> Result<(Vec<LockName>, Vec<LockKeys>), LockError> {
        let inner = &self.engine;
        let mut keyed = Vec::with_capacity(self.names.len());
        for name in &self.names {
            keyed.push((inner.keys(name, &EXCLUSIVE)?, name.clone()));
        }
        keyed.sort_by(|a, b| a.0.lock().cmp(b.0.lock()));
        keyed.dedup_by(|a, b| a.0.lock() == b.0.lock());
        Ok(keyed.into_iter().map(|(keys, name)| (name, keys)).unzip())
    }
}

impl IntoFuture for MultiLockRequest {
    type Output = Result<MultiLockGuard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.take_all())
    }
}

/// A multi-lock's uncontended path: every name in one script call.
struct AtOnce {
    inner: Arc<Engine>,
    names: Vec<LockName>,
    keys: Vec<LockKeys>,
    lease: Duration,
    watchdog: bool,
    meta: String,
    family: Family,
    scope: Option<Arc<Scope>>,
}

/// True when every lock of `keys` lives in one slot (always, off a Cluster).
#[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
fn one_slot(inner: &Engine, keys: &[LockKeys]) -> bool {
    #[cfg(feature = "cluster")]
    if inner.conn().is_cluster() {
        let slot = |k: &LockKeys| redis::cluster_routing::Slot::for_key(k.lock());
        return keys.iter().all(|k| slot(k) == slot(&keys[0]));
    }
    true
}

/// Takes every name of `request` in one call when all are free with nobody queued:
/// `Ok(None)` when it does not apply or one is busy (nothing is then held).
///
/// Cancel safety: until the answer is read, dropping this leaves each name as the
/// one-by-one path's clean-up guard does (a grant nobody saw is released).
async fn at_once(request: Option<AtOnce>) -> Result<Option<Vec<LockGuard>>, LockError> {
    let Some(r) = request else {
        return Ok(None);
    };
    let owner = owner_id(&r.inner.id, next_owner_number(), &EXCLUSIVE);
    let started = Instant::now();
    let pending: Vec<Pending<'_>> = r
        .keys
        .iter()
        .map(|keys| Pending::new(&r.inner, keys, &owner, r.lease, &r.meta))
        .collect();
    let call = scripts::multi_acquire(&r.keys, &owner, r.lease, &r.meta);
    let answer = r.inner.eval_each(&r.names[0], r.lease, call).await.pop();
    let token = match answer {
        Some(Ok(MultiAcquireReply::Acquired { token })) => token,
        Some(Ok(MultiAcquireReply::Busy { .. })) => {
            pending.into_iter().for_each(Pending::disarm);
            return Ok(None);
        }
        // Armed: dropping `pending` undoes whatever the unseen answer granted.
        Some(Err(error)) => return Err(error),
        None => return Ok(None),
    };
    pending.into_iter().for_each(Pending::disarm);
    let guards = r.names.into_iter().zip(r.keys).map(|(name, keys)| {
        let acquired = Acquired {
            name,
            keys,
            owner: owner.clone(),
            token,
            lease: r.lease,
            watchdog: r.watchdog,
            sent_at: started,
            family: r.family.clone(),
        };
        metrics::acquisition(&r.family, Ok(()), started.elapsed(), false);
        LockGuard::new(Held::new(Arc::clone(&r.inner), acquired, r.scope.clone()))
    });
    Ok(Some(guards.collect()))
}

/// Releases `guards` last first: the releases start in that order and are in flight
/// together (on one connection Redis runs them in that order), so the caller waits one
/// round trip. Errors are logged (each such lock expires with its lease).
async fn release_reversed(guards: Vec<LockGuard>) -> Option<LockError> {
    let releases = guards.into_iter().rev().map(LockGuard::release);
    let mut first_error = None;
    for result in futures_util::future::join_all(releases).await {
        if let Err(error) = result {
            tracing::warn!(%error, "releasing a multi-lock's name failed");
            first_error.get_or_insert(error);
        }
    }
    first_error
}

/// Proof that every name of a [`MultiLockRequest`] is held: one [`LockGuard`] per distinct
/// name, in the order they were taken. When every name was free, they were all taken in
/// one script call (on one server, or names of one Cluster slot). Dropping it releases them all in the background;
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

impl Guarded for MultiLockGuard {
    type Lost = MultiLost;

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

    fn release(self) -> impl Future<Output = Result<(), LockError>> + Send {
        MultiLockGuard::release(self)
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
