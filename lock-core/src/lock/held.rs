//! The shared state of one lock held in Redis, behind every guard of that hold.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::identity::HoldIdentity;
use crate::lock::quorum::Renewal;
use crate::lock::time::{drift, later};
use crate::observe::{self, observe, Event, Subject};
use crate::protocol::name::LockName;
use crate::protocol::replies::ReleaseReply;

/// One hold of a lock by one owner. Reentrant guards of a scope share it.
///
/// It knows the engine it releases through, and nothing above: the client's registry
/// ([`HoldRegistry`](super::hold_registry::HoldRegistry)) and the owner's scope keep track of it, not the reverse.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) engine: Arc<Engine>,
    pub(crate) name: LockName,
    /// Who holds it: keys, owner, capacity, lease (set at each renewal), metadata, label.
    pub(crate) identity: HoldIdentity,
    pub(crate) token: u64,
    /// True when the request set no lease: the watchdog renews it.
    pub(crate) watchdog: bool,
    pub(crate) acquired_at: Instant,
    /// When the grant reached this client (after any wait): hold times count from here.
    granted_at: Instant,
    /// Set once the end of the hold was recorded in the metrics.
    ended_recorded: AtomicBool,
    /// Guards sharing the hold (reentrancy), counted under their scope's lock.
    holds: AtomicUsize,
    /// Last confirmed expiry on the local monotonic clock (send time + TTL Redis confirmed).
    expires_at: Mutex<Instant>,
    /// Fires on loss and on release: from then on the lock cannot be assumed held.
    ended: CancellationToken,
    lost_reason: OnceLock<&'static str>,
    released: AtomicBool,
    /// The hold's span (see [`observe`](crate::observe)), taken and closed when the hold
    /// ends.
    span: Mutex<Option<tracing::Span>>,
    /// Set by a renewal Redis did not answer, cleared by a confirmed one: only the first
    /// failure of a run is a warning.
    renewal_failing: AtomicBool,
}

/// What an acquisition learned, to build a [`Held`] from.
pub(crate) struct Acquired {
    pub(crate) name: LockName,
    /// The identity the acquisition was made for, now the hold's.
    pub(crate) identity: HoldIdentity,
    pub(crate) token: u64,
    pub(crate) watchdog: bool,
    pub(crate) sent_at: Instant,
    /// The TTL Redis set at the grant, no earlier than `sent_at`: the lease, or a hand-off's
    /// claim (see [`claim`](crate::lock::claim)).
    pub(crate) ttl: Duration,
    /// When a claim is extended to the lease, from the background (`None`: not a claim).
    pub(crate) extend_at: Option<Instant>,
    /// The span the hold's span is a child of (see [`observe`](crate::observe)).
    pub(crate) trace_parent: tracing::Span,
    /// The hold's end signal (see [`Held::ended_signal`]), made before the acquisition's
    /// attempts so that their background calls can see the hold end.
    pub(crate) ended: CancellationToken,
}

impl Held {
    pub(crate) fn new(engine: Arc<Engine>, acquired: Acquired) -> Arc<Self> {
        let span = observe::hold_span(
            &acquired.trace_parent,
            &acquired.name,
            acquired.identity.keys.mode(),
            &acquired.identity.label,
            acquired.token,
            engine.config.trace_names,
        );
        let held = Arc::new(Self {
            engine,
            name: acquired.name,
            identity: acquired.identity,
            token: acquired.token,
            watchdog: acquired.watchdog,
            acquired_at: acquired.sent_at,
            granted_at: Instant::now(),
            ended_recorded: AtomicBool::new(false),
            holds: AtomicUsize::new(1),
            expires_at: Mutex::new(later(acquired.sent_at, acquired.ttl)),
            ended: acquired.ended,
            lost_reason: OnceLock::new(),
            released: AtomicBool::new(false),
            span: Mutex::new(Some(span)),
            renewal_failing: AtomicBool::new(false),
        });
        held.observe(Event::HoldStarted);
        held
    }

    pub(crate) fn scope_key(&self) -> (Arc<str>, Vec<u8>) {
        (
            Arc::clone(&self.engine.id),
            self.identity.keys.lock().to_vec(),
        )
    }

    pub(crate) fn add_hold(&self) {
        self.holds.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops one hold; true when it was the last.
    pub(crate) fn drop_hold(&self) -> bool {
        self.holds.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// When the grant reached this client.
    pub(crate) fn granted_at(&self) -> Instant {
        self.granted_at
    }

    /// Who this hold's events are about, in `span` (`None`: the current one).
    fn subject(&self, span: Option<tracing::Span>) -> Subject<'_> {
        let names = self.engine.config.trace_names;
        Subject::new(&self.identity.label, &self.name, names, span)
    }

    /// Observes `event` of this hold, inside its span.
    fn observe(&self, event: Event<'_>) {
        observe(self.subject(Some(self.span())), event);
    }

    /// The hold's span while the hold lasts; a disabled span after.
    fn span(&self) -> tracing::Span {
        let span = self.span.lock().unwrap_or_else(PoisonError::into_inner);
        span.clone().unwrap_or_else(tracing::Span::none)
    }

    fn expires_at(&self) -> Instant {
        *self
            .expires_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The instant after which the lock can no longer be assumed held.
    pub(crate) fn local_deadline(&self) -> Instant {
        self.expires_at() - drift(self.identity.lease)
    }

    /// Applies the outcome of a renewal or extension sent at `sent_at`: a confirmed TTL moves
    /// the local deadline on; a majority without the hold marks it lost, for `reason`; no
    /// answer leaves it to the local deadline.
    pub(crate) fn settle(&self, outcome: Renewal, sent_at: Instant, reason: &'static str) {
        match outcome {
            Renewal::Confirmed(ttl) => {
                self.confirm(sent_at, ttl);
                self.renewal_failing.store(false, Ordering::Relaxed);
                self.observe(Event::Renewed { ttl });
            }
            // Counted as lost where the hold ends.
            Renewal::Lost => self.mark_lost(reason),
            Renewal::Unknown => {
                let first = !self.renewal_failing.swap(true, Ordering::Relaxed);
                self.observe(Event::RenewalFailed { first });
            }
        }
    }

    /// Records a TTL that Redis confirmed for a command sent at `sent_at`.
    pub(crate) fn confirm(&self, sent_at: Instant, ttl: Duration) {
        let mut at = self
            .expires_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *at = (*at).max(later(sent_at, ttl));
    }

    pub(crate) fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost_reason.get().is_some()
    }

    pub(crate) fn is_held(&self) -> bool {
        !self.ended.is_cancelled() && Instant::now() < self.local_deadline()
    }

    /// The error for using this hold after it was lost.
    pub(crate) fn lost_error(&self) -> LockError {
        LockError::Lost {
            name: self.name.clone(),
            reason: self
                .lost_reason
                .get()
                .copied()
                .unwrap_or("its lease ran out without a confirmed renewal"),
        }
    }

    /// Marks the hold lost, once; never re-acquires.
    pub(crate) fn mark_lost(&self, reason: &'static str) {
        if self.is_released() || self.lost_reason.set(reason).is_err() {
            return;
        }
        self.observe(Event::Lost { reason });
        self.record_end();
        self.ended.cancel();
    }

    /// A handed-over hold's claim ran out before its client extended it.
    pub(crate) fn claim_missed(&self) {
        self.observe(Event::ClaimMissed);
    }

    /// Records the end of the hold in the metrics and closes its span, once (release, loss
    /// or drop).
    fn record_end(&self) {
        if !self.ended_recorded.swap(true, Ordering::AcqRel) {
            let span = self
                .span
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let ended = Event::HoldEnded {
                lost: self.lost_reason.get().copied(),
                released: self.is_released(),
                held_for: self.granted_at.elapsed(),
            };
            let span = span.unwrap_or_else(tracing::Span::none);
            observe(self.subject(Some(span)), ended);
        }
    }

    /// Resolves once the hold ended by loss or release (the local lease deadline is
    /// watched by [`Lost`](crate::lock::guard::Lost), which calls [`mark_lost`](Self::mark_lost)).
    pub(crate) fn ended_signal(&self) -> WaitForCancellationFutureOwned {
        self.ended.clone().cancelled_owned()
    }

    /// Ends the hold on this side, once: renewal stops and the end signal fires. False when
    /// it had already ended so. What happens in Redis is the caller's: a release deletes the
    /// lock, a scheduled job's lingers it (`job::linger`), an idempotent request's completes
    /// it (`idempotent`).
    pub(crate) fn end_locally(&self) -> bool {
        if self.released.swap(true, Ordering::AcqRel) {
            return false;
        }
        // From here the watchdog and the client's registry skip it.
        self.ended.cancel();
        self.record_end();
        true
    }

    /// Deletes the hold in Redis (publishing the release), once, and answers as soon as the
    /// outcome is known: once a quorum of nodes (one, or a Redlock majority) released it or
    /// answered that they no longer had it (a dead or slow minority does not hold the caller
    /// up; the calls to the other nodes go on in the background until they answer, so none
    /// is left holding), else when every node has answered.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] when a quorum of the nodes no longer had this hold (under
    /// Redlock another owner may have held a majority meanwhile); the Redis error when
    /// fewer than a quorum answered and none of them had it (the outcome is unknown).
    pub(crate) async fn release_in_redis(self: Arc<Self>) -> Result<(), LockError> {
        if !self.end_locally() {
            return Ok(());
        }
        self.delete_in_redis().await
    }

    /// The release in Redis of a hold that [ended locally](Self::end_locally).
    async fn delete_in_redis(self: Arc<Self>) -> Result<(), LockError> {
        let call = self
            .identity
            .release_call(self.engine.config.publish, false);
        // A Redlock hold missing from a majority was lost (another owner could take the
        // majority): the release must say so, not answer Ok at the first node that had it
        // (found by distlock-verify's honesty checker: a force release raced an acquisition,
        // the holder kept one node, another client took the majority, both releases said
        // Ok). Nodes that did not answer count for neither side.
        let quorum = self.engine.quorum();
        let count = |answers: &[Result<ReleaseReply, LockError>], held: bool| {
            let matching = answers
                .iter()
                .filter(|a| matches!(a, Ok(r) if r.was_held() == held));
            matching.count()
        };
        let known = |answers: &[Result<ReleaseReply, LockError>]| {
            count(answers, true) >= quorum || count(answers, false) >= quorum
        };
        let answers = (self.engine)
            .call_until(&self.name, self.identity.lease, call, known)
            .await;
        let held_for = self.granted_at.elapsed();
        // In the span current where it was released: the hold's has closed.
        let released = Event::Released {
            owner: &self.identity.owner,
            held_for,
        };
        observe(self.subject(None), released);
        let (held, gone) = (count(&answers, true), count(&answers, false));
        let not_held = || LockError::NotHeld {
            name: self.name.clone(),
        };
        if gone >= quorum {
            return Err(not_held());
        }
        if held > 0 {
            return Ok(());
        }
        // No node that answered had it, but too few answered to know it was lost (under
        // Redlock, a slow majority and one answer from a node the acquisition never
        // reached): the outcome is unknown, so say why, not `NotHeld`.
        Err(answers
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(not_held))
    }

    /// Why an owner-checked ending of this hold found nothing: [`LockError::NotHeld`] if any
    /// node answered, the first error only if none did.
    pub(crate) fn not_released<T>(&self, answers: Vec<Result<T, LockError>>) -> LockError {
        let answered = answers.iter().any(Result::is_ok);
        match answers.into_iter().find_map(Result::err) {
            Some(error) if !answered => error,
            _ => LockError::NotHeld {
                name: self.name.clone(),
            },
        }
    }

    /// Releases from a destructor: stops renewal now and deletes in the background.
    pub(crate) fn release_detached(self: Arc<Self>) {
        if self.end_locally() {
            let (engine, name) = (Arc::clone(&self.engine), self.name.clone());
            finish_in_background(engine, name, self.delete_in_redis());
        }
    }
}

/// Runs `release` of the lock `name` to its end on the current runtime, logging a failure
/// (as `engine`'s health says: not once per lock during an outage). Outside a runtime
/// nothing can reach Redis: the lock expires after its lease.
pub(crate) fn finish_in_background(
    engine: Arc<Engine>,
    name: LockName,
    release: impl Future<Output = Result<(), LockError>> + Send + 'static,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            // Tracked: `shutdown()` waits for it.
            let cleanups = engine.cleanups.clone();
            let release = async move {
                if let Err(error) = release.await {
                    (engine.health).log_failure(&error, "background release failed");
                }
            };
            cleanups.spawn_on(release, &runtime);
        }
        Err(_) => tracing::warn!(
            distlock.lock.name = observe::name(&name, engine.config.trace_names),
            "released outside a Tokio runtime: the lock expires after its lease"
        ),
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A hold whose guard was dropped outside a runtime ends here.
        self.record_end();
    }
}
