//! A request for one hold of one name: what it is (name, kind, permits), its options
//! ([`RequestOptions`]), and the ways to take it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::error::LockError;
use crate::lock::acquire;
use crate::lock::engine::Engine;
use crate::lock::guard::LockGuard;
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::options::{
    busy_is_none, option_setters, run_in_scope, Acquisition, RequestOptions, Started,
};
use crate::observe::{self, observe, Event, MetricsLabel, Subject};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;

/// A request for one hold of one name: the lock ([`LockClient::lock`](crate::LockClient::lock)), a side of a
/// read-write lock ([`LockClient::read_lock`](crate::LockClient::read_lock), [`LockClient::write_lock`](crate::LockClient::write_lock)) or a semaphore's
/// permit ([`LockClient::semaphore`](crate::LockClient::semaphore)).
///
/// `.await` it to acquire, waiting up to the wait; [`try_acquire`](Self::try_acquire) tries
/// once; [`run`](Self::run) runs a future under the lock.
///
/// The request is itself the acquisition's future, started at its first poll: it composes
/// as written with what takes a future — `tracing`'s `.instrument(span)`,
/// `tokio::time::timeout`, `tokio::select!`, `futures`' combinators. Its options are read
/// then: set them before.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tracing::Instrument as _;
///
/// let span = tracing::info_span!("checkout", order = 42);
/// let guard = client.lock("order_42").instrument(span).await?;
/// guard.release().await?;
/// let bounded = tokio::time::timeout(Duration::from_secs(1), client.lock("order_42")).await;
/// let guard = bounded??; // the timeout's error, then the lock's
/// # drop(guard);
/// # Ok(()) }
/// ```
#[must_use = "a lock request does nothing until awaited"]
pub struct LockRequest {
    engine: Arc<Engine>,
    /// The client's holds, which the hold joins.
    holds: Arc<HoldRegistry>,
    pub(crate) name: LockName,
    pub(crate) kind: LockMode,
    /// A semaphore's capacity as this caller sees it (1 for the other kinds).
    pub(crate) permits: u32,
    pub(crate) options: RequestOptions,
    /// The acquisition, from the first poll on.
    started: Started<Result<LockGuard, LockError>>,
}

impl fmt::Debug for LockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRequest")
            .field("name", &self.name)
            .field("mode", &self.kind)
            .field("options", &self.options)
            .finish()
    }
}

impl LockRequest {
    pub(crate) fn new(
        engine: Arc<Engine>,
        holds: Arc<HoldRegistry>,
        name: LockName,
        kind: LockMode,
    ) -> Self {
        let options = RequestOptions::new(&engine);
        Self {
            engine,
            holds,
            name,
            kind,
            permits: 1,
            options,
            started: Started::default(),
        }
    }

    /// True when the client opted in to lock names in its log events.
    pub(crate) fn trace_names(&self) -> bool {
        self.engine.config.trace_names
    }

    pub(crate) fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    option_setters!();

    /// Acquires the lock, waiting up to the wait. A waiter is woken by the holder's release
    /// message and, should that be missed, by the holder's remaining TTL.
    ///
    /// # Errors
    /// [`LockError::WaitTimeout`] when it stayed busy; [`LockError::Unavailable`] or
    /// [`LockError::Timeout`] when Redis cannot be reached (within the wait plus the command
    /// timeout); [`LockError::NotReplicated`] when too few replicas acknowledged
    /// the hold in time (by default, one is waited for where the master has one; see
    /// [`replica_ack`](crate::LockClientBuilder::replica_ack)); [`LockError::Refused`] when Redis refuses the
    /// command (the name collides with a key that is not a lock, say);
    /// [`LockError::InvalidName`], [`LockError::InvalidRequest`] for bad input;
    /// [`LockError::Lost`] when re-entering a lock this scope has lost.
    ///
    /// # Cancel safety
    /// Dropping the future at any point leaves no lock held: an acquisition whose answer was
    /// not seen is undone in the background.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        self.await
    }

    /// Tries once: `Ok(None)` when another owner holds the lock.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), except that a busy lock is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        busy_is_none(self.wait(Duration::ZERO).acquire().await)
    }

    /// Runs `fut` under the lock inside a reentrancy [`scope`](crate::scope), then releases the lock —
    /// also when `fut` panics or this future is dropped. While `fut` runs,
    /// [`current_lock`](crate::current_lock) returns the lock's name and fencing token.
    ///
    /// With [`OnLost::Abort`](crate::OnLost::Abort), `fut` is dropped at its next `.await` once the lock is lost,
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
        let on_lost = self.options.on_lost;
        run_in_scope(self.acquire(), on_lost, fut).await
    }
}

impl Future for LockRequest {
    type Output = Result<LockGuard, LockError>;

    /// Starts the acquisition at the first poll (with the options set until then), then
    /// drives it (as [`acquire`](LockRequest::acquire)).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Self {
            engine,
            holds,
            name,
            kind,
            permits,
            options,
            started,
        } = self.get_mut();
        started.poll(cx, || {
            let options = std::mem::replace(options, RequestOptions::new(engine));
            let name = std::mem::replace(name, LockName::new(Vec::new()));
            let (engine, holds) = (Arc::clone(engine), Arc::clone(holds));
            acquisition(engine, holds, name, *kind, *permits, options)
        })
    }
}

/// The acquisition of `name` as one boxed future, traced: its span under the one current
/// where it first runs.
fn acquisition(
    engine: Arc<Engine>,
    holds: Arc<HoldRegistry>,
    name: LockName,
    kind: LockMode,
    permits: u32,
    mut options: RequestOptions,
) -> Acquisition<Result<LockGuard, LockError>> {
    let traced = async move {
        // The span current where the request runs (at its first poll, as `#[instrument]`
        // does): the acquisition's and the hold's spans go under it.
        options.trace_parent = tracing::Span::current();
        let names = engine.config.trace_names;
        let label = options.label.clone();
        let span = observe::acquire_span(&options.trace_parent, &name, kind, &label, names);
        let started = Instant::now();
        let acquisition = acquire::acquire(engine, holds, name, kind, permits, options);
        let result = acquisition.instrument(span.clone()).await;
        answered(&result, started, &label, names, span);
        result
    };
    // Boxed: the acquisition state machine is large, and callers nest it in their own.
    Box::pin(traced)
}

/// Observes the answer to a request that began at `started`, on its `span`, naming the lock
/// only when `names`.
fn answered(
    result: &Result<LockGuard, LockError>,
    started: Instant,
    label: &MetricsLabel,
    names: bool,
    span: tracing::Span,
) {
    // A re-entered hold was granted before this acquisition began.
    let reentered = matches!(result, Ok(guard) if guard.held().granted_at() < started);
    let answered = Event::Answered {
        outcome: observe::outcome(result, reentered),
        waited: started.elapsed(),
    };
    let name = result
        .as_ref()
        .map_or_else(LockError::name, |guard| Some(guard.name()));
    observe(Subject::new(label, name, names, Some(span)), answered);
}
