//! The request for several names, and its one-by-one path: each name an ordinary lock
//! request, in the global order.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use super::at_once::{at_once, one_slot, AtOnce};
use super::guard::{release_reversed, MultiLockGuard};
use crate::error::LockError;
use crate::lock::config::check_request_lease;
use crate::lock::engine::Engine;
use crate::lock::guard::LockGuard;
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::options::{busy_is_none, option_setters, run_in_scope, RequestOptions, Started};
use crate::lock::request::LockRequest;
use crate::lock::scope::Scope;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::{LockKeys, LockName};

/// A request for several locks at once, made by [`LockClient::lock_all`](crate::LockClient::lock_all).
///
/// `.await` it (or [`acquire`](Self::acquire)) for a [`MultiLockGuard`] holding every
/// name; the options are those of [`LockRequest`] and apply to each name, and the wait
/// bounds the whole acquisition. As a [`LockRequest`], the request is itself the
/// acquisition's future, started at its first poll (`.instrument(span)`,
/// `tokio::time::timeout` take it as it is).
#[must_use = "a lock request does nothing until awaited"]
pub struct MultiLockRequest {
    engine: Arc<Engine>,
    /// The client's holds, which every name's hold joins.
    holds: Arc<HoldRegistry>,
    /// The names as given (a name given twice is taken once).
    names: Vec<LockName>,
    options: RequestOptions,
    /// The acquisition, from the first poll on.
    started: Started<Result<MultiLockGuard, LockError>>,
}

impl fmt::Debug for MultiLockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockRequest")
            .field("names", &self.names)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl MultiLockRequest {
    pub(crate) fn new(engine: Arc<Engine>, holds: Arc<HoldRegistry>, names: Vec<LockName>) -> Self {
        let options = RequestOptions::new(&engine);
        Self {
            engine,
            holds,
            names,
            options,
            started: Started::default(),
        }
    }

    // The same options as a single lock's, applying to each name; the wait bounds the
    // whole acquisition.
    option_setters!();

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
        self.await
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
        busy_is_none(self.wait(Duration::ZERO).acquire().await)
    }

    /// Runs `fut` under all the locks inside a reentrancy [`scope`](crate::scope), then releases them in
    /// reverse order — also when `fut` panics or this future is dropped. While `fut` runs,
    /// [`current_lock`](crate::current_lock) answers the first name given.
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire), and [`LockError::Lost`] when one of the
    /// locks is lost under [`OnLost::Abort`](crate::OnLost::Abort).
    ///
    /// # Cancel safety
    /// Dropping this future drops `fut` and releases the locks in the background.
    pub async fn run<F: Future>(self, fut: F) -> Result<F::Output, LockError> {
        let on_lost = self.options.on_lost;
        run_in_scope(self.acquire(), on_lost, fut).await
    }

    /// The request for one name, with this request's options and what is left of the wait.
    fn request_for(&self, name: &LockName, deadline: Option<Instant>) -> LockRequest {
        let (engine, holds) = (Arc::clone(&self.engine), Arc::clone(&self.holds));
        let mut request = LockRequest::new(engine, holds, name.clone(), LockMode::Exclusive);
        let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        request.options = RequestOptions {
            wait,
            ..self.options.clone()
        };
        request
    }

    async fn take_all(self) -> Result<MultiLockGuard, LockError> {
        let Some(first) = self.names.first().cloned() else {
            return Err(LockError::InvalidRequest {
                name: LockName::from(""),
                reason: "lock_all needs at least one name".to_owned(),
            });
        };
        if self.holds.is_closed() {
            return Err(LockError::ShutDown { name: first });
        }
        self.engine.health.admit(&first)?;
        let (order, keys) = self.global_order()?;
        let first_given = order.iter().position(|n| *n == first).unwrap_or(0);
        let deadline = self.options.wait.map(|wait| Instant::now() + wait);
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
    /// Cluster, not Redlock (names need a majority each), and no name already held by the
    /// caller's scope (re-entry is the one-by-one path's). Replica acknowledgements apply:
    /// one `WAIT` for every name.
    fn at_once_request(
        &self,
        order: &[LockName],
        keys: Vec<LockKeys>,
    ) -> Result<Option<AtOnce>, LockError> {
        let engine = &self.engine;
        if order.len() < 2 || engine.nodes.len() > 1 {
            return Ok(None);
        }
        let lease = self.options.lease_on(engine);
        check_request_lease(&order[0], lease)?;
        let scope = Scope::current();
        let reentry = scope
            .as_ref()
            .is_some_and(|s| s.holds_any(&engine.id, keys.iter().map(LockKeys::lock)));
        if reentry || !one_slot(engine, &keys) {
            return Ok(None);
        }
        Ok(Some(AtOnce {
            engine: Arc::clone(engine),
            holds: Arc::clone(&self.holds),
            names: order.to_vec(),
            keys,
            lease,
            watchdog: self.options.watchdog(),
            meta: engine.holder_meta(self.options.request_id.as_deref()),
            label: self.options.label.clone(),
            scope,
        }))
    }

    /// The distinct names, and their keys, in the order of their Redis keys: one total
    /// order for every client of the same key prefix, so no two callers wait for each other
    /// in a cycle.
    fn global_order(&self) -> Result<(Vec<LockName>, Vec<LockKeys>), LockError> {
        let engine = &self.engine;
        let mut keyed = Vec::with_capacity(self.names.len());
        for name in &self.names {
            keyed.push((engine.keys(name, LockMode::Exclusive)?, name.clone()));
        }
        keyed.sort_by(|a, b| a.0.lock().cmp(b.0.lock()));
        keyed.dedup_by(|a, b| a.0.lock() == b.0.lock());
        Ok(keyed.into_iter().map(|(keys, name)| (name, keys)).unzip())
    }
}

impl Future for MultiLockRequest {
    type Output = Result<MultiLockGuard, LockError>;

    /// Starts the acquisition at the first poll (with the options set until then), then
    /// drives it (as [`acquire`](MultiLockRequest::acquire)).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Self {
            engine,
            holds,
            names,
            options,
            started,
        } = self.get_mut();
        started.poll(cx, || {
            let (engine, holds) = (Arc::clone(engine), Arc::clone(holds));
            let mut request = Self::new(engine, holds, std::mem::take(names));
            std::mem::swap(&mut request.options, options);
            Box::pin(request.take_all())
        })
    }
}
