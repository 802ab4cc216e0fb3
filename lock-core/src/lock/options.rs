//! The options every request shares, for one name ([`LockRequest`](crate::LockRequest)) or
//! several ([`MultiLockRequest`](crate::MultiLockRequest)): one struct, one set of setters
//! ([`option_setters`]), one way to try once and to run work under the hold, and what a
//! request becomes when first polled ([`Started`]).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::guarded_run::{Guarded, GuardedRun, OnLost};
use crate::lock::scope::scope;
use crate::observe::{MetricsLabel, DEFAULT_LABEL};

/// A request's options.
#[derive(Clone, Debug)]
pub(crate) struct RequestOptions {
    /// An explicit lease; `None`: the client's, renewed by the watchdog.
    pub(crate) lease: Option<Duration>,
    /// How long to wait for a busy lock; `None`: without limit.
    pub(crate) wait: Option<Duration>,
    /// The metrics label.
    pub(crate) label: MetricsLabel,
    pub(crate) request_id: Option<String>,
    pub(crate) on_lost: OnLost,
    /// The span the request was awaited in: the parent of its acquisition's and its hold's
    /// spans (set when the request becomes a future).
    pub(crate) trace_parent: tracing::Span,
}

impl RequestOptions {
    /// The defaults of `engine`'s client.
    pub(crate) fn new(engine: &Engine) -> Self {
        Self {
            lease: None,
            wait: engine.config.wait,
            label: Cow::Borrowed(DEFAULT_LABEL),
            request_id: None,
            on_lost: OnLost::Abort,
            trace_parent: tracing::Span::none(),
        }
    }

    /// The lease of the hold: the request's, else the client's.
    pub(crate) fn lease_on(&self, engine: &Engine) -> Duration {
        self.lease.unwrap_or(engine.config.lease)
    }

    /// True when the watchdog renews the hold (no explicit lease).
    pub(crate) fn watchdog(&self) -> bool {
        self.lease.is_none()
    }
}

/// The setters of [`RequestOptions`], for a request type with an `options` field: the same
/// public methods, with the same docs, on every request.
macro_rules! option_setters {
    () => {
        /// An explicit lease: the hold expires after `lease` unless extended, and the
        /// watchdog does not renew it (as Redisson's `lock(leaseTime, unit)`).
        pub fn lease(mut self, lease: std::time::Duration) -> Self {
            self.options.lease = Some(lease);
            self
        }

        /// Waits at most `wait` for a busy lock; `Duration::ZERO` tries once.
        pub fn wait(mut self, wait: std::time::Duration) -> Self {
            self.options.wait = Some(wait);
            self
        }

        /// Waits for a busy lock without limit.
        pub fn wait_forever(mut self) -> Self {
            self.options.wait = None;
            self
        }

        /// The metrics label of this lock: the key template its name was made from (e.g.
        /// `"item_<id>"`), never the name itself, so the number of series stays bounded.
        /// `#[distributed_lock]` and `lock-tower` set it to their template. Metrics carry it
        /// as `template=<label>`.
        ///
        /// # Default
        /// `"default"`.
        pub fn metrics_label(mut self, label: impl Into<std::borrow::Cow<'static, str>>) -> Self {
            self.options.label = label.into();
            self
        }

        /// A request id recorded with the hold, for operators (see
        /// [`HolderInfo::request_id`](crate::HolderInfo::request_id)).
        pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
            self.options.request_id = Some(request_id.into());
            self
        }

        /// What `run` does when the lock is lost; [`OnLost::Abort`](crate::OnLost::Abort)
        /// by default.
        pub fn on_lost(mut self, on_lost: crate::OnLost) -> Self {
            self.options.on_lost = on_lost;
            self
        }
    };
}
pub(crate) use option_setters;

/// One attempt's answer: a busy lock is `Ok(None)`.
pub(crate) fn busy_is_none<G>(taken: Result<G, LockError>) -> Result<Option<G>, LockError> {
    match taken {
        Ok(guard) => Ok(Some(guard)),
        Err(LockError::WaitTimeout { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs `work` under the hold `acquire` takes, inside a reentrancy scope (see
/// [`GuardedRun`]).
pub(crate) async fn run_in_scope<G: Guarded, F: Future>(
    acquire: impl Future<Output = Result<G, LockError>>,
    on_lost: OnLost,
    work: F,
) -> Result<F::Output, LockError> {
    scope(async move { GuardedRun::new(acquire.await?, on_lost, work).await }).await
}

/// What a request becomes at its first poll: its acquisition, one boxed future (the only
/// allocation of taking a lock besides Redis' own). In a `Mutex` only so that the request
/// stays `Sync`: polling has `&mut` and never locks it.
pub(crate) struct Started<T>(Mutex<Option<Acquisition<T>>>);

/// An acquisition under way.
pub(crate) type Acquisition<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<T> Default for Started<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T> Started<T> {
    /// Polls the acquisition, made by `start` at the first poll (from the options set
    /// until then).
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        start: impl FnOnce() -> Acquisition<T>,
    ) -> Poll<T> {
        let started = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        started.get_or_insert_with(start).as_mut().poll(cx)
    }
}
