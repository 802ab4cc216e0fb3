//! The guard handed out for a held lock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::error::LockError;
use crate::lock::claim;
use crate::lock::config::check_request_lease;
use crate::lock::current_lock::LockInfo;
use crate::lock::engine::Engine;
use crate::lock::guarded_run::{Guarded, GuardedRun, OnLost};
use crate::lock::held::{finish_in_background, Acquired, Held};
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::quorum::{renewal, Renewal};
use crate::lock::revoke;
use crate::lock::scope::Scope;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::lock_calls;
use crate::protocol::name::LockName;
use crate::protocol::replies::RenewReply;

/// Proof of a held lock. Owned, `Send` and `'static`: keep it in a struct, move it into a
/// task, hold it across `.await`s.
///
/// Dropping the guard stops its renewal at once and releases the lock in the background on
/// the current Tokio runtime; [`release`](Self::release) does the same and reports the
/// outcome. A guard dropped outside any Tokio runtime cannot reach Redis: its lock then
/// expires when its lease ends (at most one lease, since renewal stops with the drop).
///
/// Inside a reentrancy [`scope`](crate::scope), guards of the same lock share one hold in
/// Redis, which is released when the last of them goes.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    held: Arc<Held>,
    /// The reentrancy scope the hold is shared in, if it was taken inside one.
    scope: Option<Arc<Scope>>,
    active: bool,
}

impl LockGuard {
    /// The guard of a fresh grant: the one place an acquisition becomes a hold (one name's
    /// acquisition, or each name of a multi-lock's one-call path). The hold joins the
    /// client's registry (renewal, revocation, shutdown) and the owner's scope.
    pub(crate) fn granted(
        engine: &Arc<Engine>,
        holds: &Arc<HoldRegistry>,
        acquired: Acquired,
        scope: Option<Arc<Scope>>,
    ) -> Self {
        let extend_at = acquired.extend_at;
        let held = Held::new(Arc::clone(engine), acquired);
        if holds.insert(&held) {
            revoke::listen(engine, holds);
            if let Some(at) = extend_at {
                claim::extend_later(&held, at);
            }
        } else {
            // Granted while the client shut down: given back at once.
            held.mark_lost("the lock client shut down");
            Arc::clone(&held).release_detached();
        }
        if let Some(scope) = &scope {
            scope.insert(&held);
        }
        Self::reentered(held, scope)
    }

    /// Another guard of `held`, a hold of `scope` (whose reentry counted it).
    pub(crate) fn reentered(held: Arc<Held>, scope: Option<Arc<Scope>>) -> Self {
        Self {
            held,
            scope,
            active: true,
        }
    }

    /// The hold behind this guard.
    pub(crate) fn held(&self) -> &Held {
        &self.held
    }

    /// Gives this guard's hold back without a release in Redis: the shared hold when this
    /// was its outermost guard, for the caller to end (`job::linger`), else `None`.
    pub(crate) fn into_outermost(mut self) -> Option<Arc<Held>> {
        self.active = false;
        self.release_hold().then(|| Arc::clone(&self.held))
    }

    /// Drops this guard's hold, through the scope when there is one; true for the outermost.
    fn release_hold(&self) -> bool {
        match &self.scope {
            Some(scope) => scope.release_hold(&self.held),
            None => self.held.drop_hold(),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &LockName {
        &self.held.name
    }

    /// What this hold is: an exclusive lock, a reader or writer of a read-write lock, or a
    /// semaphore's permit. A read guard re-entered from the scope's write lock answers
    /// [`LockMode::Write`]: it is that hold.
    pub fn mode(&self) -> LockMode {
        self.held.identity.keys.mode()
    }

    /// The fencing token of this hold: strictly greater than every token issued before for
    /// this name by any distlock client, also across expiries; re-entering keeps it.
    /// Pass it to the resource you guard and have it reject writes with a lower token.
    ///
    /// A token is the Redis clock in microseconds at the grant (about 1.8 × 10¹⁵, within the
    /// 2⁵³ that JSON numbers hold exactly), above the previous holder's token when Redis
    /// knows it: tokens keep rising when all of the name's state is gone, even lost with
    /// Redis' data, unless the Redis clock went back in between (see SAFETY.md). They are
    /// increasing, not consecutive.
    pub fn fencing_token(&self) -> u64 {
        self.held.token
    }

    /// The name and fencing token, detached from the guard.
    pub fn info(&self) -> LockInfo {
        LockInfo::of(&self.held)
    }

    /// True while the lock can be assumed held: not released, no renewal found it gone, and
    /// its last confirmed lease (less a drift margin) has not run out on the local clock.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// A future that resolves when the lock can no longer be assumed held: a renewal found
    /// the key deleted, expired or taken over, or the last confirmed lease less a drift margin
    /// has passed on the local monotonic clock with no answer from Redis. It also resolves
    /// once the lock is released. The lock is never re-acquired silently.
    ///
    /// The future is `'static` and nameable ([`Lost`]): race it against the guarded work
    /// with `tokio::select!`, or keep it as a field of your own future.
    ///
    /// # Cancel safety
    /// Dropping the future has no effect on the lock.
    pub fn lost(&self) -> Lost {
        Lost {
            held: Arc::clone(&self.held),
            ended: self.held.ended_signal(),
            deadline: None,
        }
    }

    /// The [`LockError::Lost`] for this hold, naming the lock and why it was lost, as
    /// [`LockRequest::run`](crate::LockRequest::run) returns it: for code that races
    /// [`lost`](Self::lost) against its work itself.
    pub fn lost_error(&self) -> LockError {
        self.held.lost_error()
    }

    /// Makes the lock's remaining lease at least `lease` from now; never shortens it.
    ///
    /// # Errors
    /// [`LockError::Lost`] when Redis no longer has this hold, [`LockError::InvalidRequest`]
    /// for a lease out of range, and the Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the lease either extended or as it was.
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let held = &self.held;
        check_request_lease(&held.name, lease)?;
        if held.is_lost() || held.is_released() {
            return Err(held.lost_error());
        }
        let call = lock_calls::renew([(&held.identity.keys, held.identity.owner.as_str(), lease)]);
        let sent_at = Instant::now();
        let nodes = held.engine.nodes.len();
        let ttls = |answers: &[Result<RenewReply, LockError>]| -> Vec<Option<i64>> {
            let ttl = |a: &Result<RenewReply, LockError>| a.as_ref().ok()?.ttl_ms(0);
            answers.iter().map(ttl).collect()
        };
        let settled = |answers: &[Result<RenewReply, LockError>]| {
            !matches!(renewal(ttls(answers), nodes), Renewal::Unknown)
        };
        let mut answers = held
            .engine
            .call_until(&held.name, lease, call, settled)
            .await;
        let outcome = renewal(ttls(&answers), nodes);
        held.settle(
            outcome,
            sent_at,
            "an extension found the lock gone or taken over",
        );
        match outcome {
            Renewal::Confirmed(_) => Ok(()),
            Renewal::Lost => Err(held.lost_error()),
            Renewal::Unknown => Err(answers
                .drain(..)
                .find_map(Result::err)
                .unwrap_or_else(|| held.lost_error())),
        }
    }

    /// Runs `work` under this hold, then releases it: the future that
    /// [`LockRequest::run`](crate::LockRequest::run) awaits once the lock is taken, nameable
    /// so that a hand-written future (a tower service's, say) can hold it as a field. With
    /// [`OnLost::Abort`] the work is dropped at its next `.await` once the hold is lost.
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
    /// use lock_core::{GuardedRun, LockGuard, OnLost};
    /// let guard = client.lock("item_7").await?;
    /// let token = guard.fencing_token();
    /// let run: GuardedRun<LockGuard, _> = guard.run(OnLost::Abort, async move { token });
    /// assert_eq!(run.await?, token); // released before it resolves
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The future resolves to [`LockError::Lost`] when the hold is lost under
    /// [`OnLost::Abort`].
    ///
    /// # Cancel safety
    /// Dropping the future drops the work and this guard, which releases the hold in the
    /// background.
    pub fn run<F: Future>(self, on_lost: OnLost, work: F) -> GuardedRun<Self, F> {
        GuardedRun::new(self, on_lost, work)
    }

    /// Releases this hold. The Redis lock is deleted (and waiters woken) when this is the
    /// outermost hold of its scope.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] when Redis no longer had this owner's hold (it expired or was
    /// taken over; nothing was deleted), and the Redis errors (the lock then expires with its
    /// lease, since renewal has stopped).
    ///
    /// The returned future ([`Release`]) does nothing until polled.
    ///
    /// # Cancel safety
    /// Dropping this future does not stop the release: started, it goes on in the
    /// background on the runtime; not started, the guard it holds releases as it drops.
    ///
    /// # Panics
    /// When polled outside a Tokio runtime (as every Redis call of this crate).
    pub fn release(self) -> Release {
        Release {
            guard: Some(self),
            running: None,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.active && self.release_hold() {
            Arc::clone(&self.held).release_detached();
        }
    }
}

impl crate::lock::guarded_run::sealed::Sealed for LockGuard {}

impl Guarded for LockGuard {
    type Lost = Lost;
    type Release = Release;

    fn lost(&self) -> Lost {
        LockGuard::lost(self)
    }

    fn lost_error(&self) -> LockError {
        LockGuard::lost_error(self)
    }

    fn info(&self) -> LockInfo {
        LockGuard::info(self)
    }

    fn release(self) -> Release {
        LockGuard::release(self)
    }

    fn reachable(&self) -> bool {
        self.held.engine.health.is_reachable()
    }

    fn names(&self) -> bool {
        self.held.engine.config.trace_names
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.held.name)
            .field("mode", &self.mode())
            .field("owner", &self.held.identity.owner)
            .field("fencing_token", &self.held.token)
            .field("held", &self.held.is_held())
            .finish()
    }
}

pin_project! {
    /// The future of [`LockGuard::lost`]: resolves when the lock can no longer be assumed
    /// held.
    ///
    /// It holds the hold's shared state, a wait on its end signal and, once polled, one
    /// timer for the local lease deadline: no allocation. Polling it after it resolved
    /// resolves again.
    #[must_use = "futures do nothing unless polled"]
    pub struct Lost {
        held: Arc<Held>,
        #[pin]
        ended: WaitForCancellationFutureOwned,
        // Made at the first poll, so that `lost()` needs no runtime.
        #[pin]
        deadline: Option<Sleep>,
    }
}

impl Future for Lost {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        if this.ended.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        loop {
            // The deadline moves on with every confirmed renewal: re-read it when it passes.
            let sleep = match this.deadline.as_mut().as_pin_mut() {
                Some(sleep) => sleep,
                None => {
                    let deadline = this.held.local_deadline();
                    this.deadline.set(Some(tokio::time::sleep_until(deadline)));
                    this.deadline.as_mut().as_pin_mut().expect("just set")
                }
            };
            ready!(sleep.poll(cx));
            let deadline = this.held.local_deadline();
            if Instant::now() >= deadline {
                this.held
                    .mark_lost("its lease ran out without a confirmed renewal");
                return Poll::Ready(());
            }
            this.deadline
                .as_mut()
                .as_pin_mut()
                .expect("set above")
                .reset(deadline);
        }
    }
}

impl fmt::Debug for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lost")
            .field("name", &self.held.name)
            .field("held", &self.held.is_held())
            .finish()
    }
}

/// The future of [`LockGuard::release`]: the outcome of releasing one hold.
///
/// At its first poll it gives the hold back to its scope and, for the outermost hold,
/// starts the release in Redis, which it then drives. Dropped before that finished, it
/// hands the release to the runtime, which finishes it in the background.
#[must_use = "futures do nothing unless polled"]
pub struct Release {
    guard: Option<LockGuard>,
    /// The release under way, and its hold (for the lock's name should it be left to a task).
    running: Option<(ReleaseInRedis, Arc<Held>)>,
}

/// The release in Redis, boxed: it is moved to a task when its future is dropped.
type ReleaseInRedis = Pin<Box<dyn Future<Output = Result<(), LockError>> + Send>>;

impl Future for Release {
    type Output = Result<(), LockError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(guard) = this.guard.take() {
            let Some(held) = guard.into_outermost() else {
                return Poll::Ready(Ok(()));
            };
            let release = Arc::clone(&held).release_in_redis();
            this.running = Some((Box::pin(release), held));
        }
        let Some((release, _)) = this.running.as_mut() else {
            // Polled again after it resolved: the release was reported then.
            return Poll::Ready(Ok(()));
        };
        let outcome = ready!(release.as_mut().poll(cx));
        this.running = None;
        Poll::Ready(outcome)
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        // Not started: a guard still here releases as it drops.
        if let Some((release, held)) = self.running.take() {
            finish_in_background(Arc::clone(&held.engine), held.name.clone(), release);
        }
    }
}

impl fmt::Debug for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match (&self.guard, &self.running) {
            (Some(guard), _) => Some(guard.name()),
            (None, Some((_, held))) => Some(&held.name),
            (None, None) => None,
        };
        f.debug_struct("Release")
            .field("name", &name)
            .field("started", &self.guard.is_none())
            .finish()
    }
}
