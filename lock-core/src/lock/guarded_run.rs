//! Running work under a hold: [`GuardedRun`], what [`LockRequest::run`](crate::LockRequest::run),
//! [`MultiLockRequest::run`](crate::MultiLockRequest::run), [`LockGuard::run`] and
//! lock-tower's response future share.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::error::LockError;
use crate::lock::current_lock::{with_lock_info, LockInfo, WithLockInfo};
use crate::observe;

/// A hold that work can run under: a [`LockGuard`](crate::LockGuard) or a
/// [`MultiLockGuard`](crate::MultiLockGuard).
pub trait Guarded: Sized + sealed::Sealed {
    /// Resolves when the hold can no longer be assumed held.
    #[doc(hidden)]
    type Lost: Future<Output = ()> + Send;
    /// The release of the hold.
    #[doc(hidden)]
    type Release: Future<Output = Result<(), LockError>> + Send;
    #[doc(hidden)]
    fn lost(&self) -> Self::Lost;
    #[doc(hidden)]
    fn lost_error(&self) -> LockError;
    /// What [`current_lock`](crate::current_lock) answers inside the work.
    #[doc(hidden)]
    fn info(&self) -> LockInfo;
    #[doc(hidden)]
    fn release(self) -> Self::Release;
    /// False when the client's last calls did not reach Redis: a release would likely wait
    /// its whole command timeout.
    #[doc(hidden)]
    fn reachable(&self) -> bool;
    /// True when the client opted in to lock names in its log events.
    #[doc(hidden)]
    fn names(&self) -> bool;
}

/// What `run` does with the guarded work when the lock is lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the work at its next `.await` and return [`LockError::Lost`] (the default).
    #[default]
    Abort,
    /// Let the work run on; the loss is only logged.
    Continue,
}

/// The longest a [`GuardedRun`] waits for its hold's release before it resolves; the
/// release goes on in the background.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_millis(500);

pub(crate) mod sealed {
    /// Only lock-core's guards are [`Guarded`](super::Guarded).
    pub trait Sealed {}
}

pin_project! {
    /// `work` run under a hold, then the hold released: made by
    /// [`LockGuard::run`](crate::LockGuard::run).
    ///
    /// With [`OnLost::Abort`] it drops the work at its next `.await` once the hold is lost
    /// and resolves to [`LockError::Lost`] — also when the loss shows only as the work
    /// completes (a process paused past its lease: both are ready when it resumes, and the
    /// loss is polled first) or at the release (the hold was gone, force-released say,
    /// before a renewal noticed): the caller asked to be told. When the work is done it
    /// releases the hold, then resolves to the work's output: a caller that sends its next
    /// request at once does not find its own lock. Any other failed release after the work
    /// completed is logged, not returned: the work is done and its output is more useful to
    /// the caller. The release
    /// is awaited 500 ms at most — and with [`OnLost::Continue`] not at all while the
    /// client's last calls did not reach Redis: a Redis that just died does not hold every
    /// caller for the command timeout (the release finishes in the background, or the lease
    /// ends the hold). A release not answered within the bound confirms nothing: the output
    /// is returned and the release's outcome logged.
    ///
    /// # Cancel safety
    /// Dropping it drops the work and the guard, which releases the hold in the background.
    #[must_use = "futures do nothing unless polled"]
    pub struct GuardedRun<G: Guarded, F: Future> {
        #[pin]
        state: State<G, F>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwn]
    enum State<G: Guarded, F: Future> {
        Working {
            #[pin]
            work: WithLockInfo<F>,
            // `None` with `OnLost::Continue`.
            #[pin]
            lost: Option<G::Lost>,
            guard: G,
        },
        Releasing {
            #[pin]
            release: G::Release,
            #[pin]
            bound: Sleep,
            output: F::Output,
            // With `OnLost::Abort`: what a release that finds the hold gone answers.
            lost: Option<LockError>,
            // Whether a failed release's log names the lock.
            names: bool,
        },
        Done,
    }
}

impl<G: Guarded, F: Future> GuardedRun<G, F> {
    pub(crate) fn new(guard: G, on_lost: OnLost, work: F) -> Self {
        let lost = (on_lost == OnLost::Abort).then(|| guard.lost());
        Self {
            state: State::Working {
                work: with_lock_info(guard.info(), work),
                lost,
                guard,
            },
        }
    }
}

impl<G: Guarded, F: Future> Future for GuardedRun<G, F> {
    type Output = Result<F::Output, LockError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Working { work, lost, guard } => {
                    // The loss first: after a pause both are ready, and the hold did not
                    // last the work (found by distlock-verify's honesty checker).
                    let abort = lost.is_some();
                    if let Some(lost) = lost.as_pin_mut() {
                        if lost.poll(cx).is_ready() {
                            let error = guard.lost_error();
                            // Drops the work, then the guard (whose hold has ended).
                            state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                    }
                    let output = ready!(work.poll(cx));
                    let StateOwn::Working { guard, .. } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    // Without `Abort` the release has nothing to tell the caller: skipped
                    // while Redis seems down. With it, the release is the last check that
                    // the hold lasted, and a client's view of an outage can be stale (Redis
                    // back, empty, and the lock another's: found by distlock-verify's
                    // honesty checker), so it is tried, within the bound.
                    if !abort && !guard.reachable() {
                        // Dropped, the guard releases in the background.
                        drop(guard);
                        return Poll::Ready(Ok(output));
                    }
                    let lost = abort.then(|| guard.lost_error());
                    let names = guard.names();
                    state.set(State::Releasing {
                        release: guard.release(),
                        bound: tokio::time::sleep(RELEASE_WAIT),
                        output,
                        lost,
                        names,
                    });
                }
                StateProj::Releasing {
                    release,
                    bound,
                    lost,
                    names,
                    ..
                } => {
                    let names = *names;
                    match release.poll(cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(LockError::NotHeld { .. })) if lost.is_some() => {
                            let error = lost.take().expect("checked");
                            state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                        // An outage: the client's health logged it once (every outage
                        // error passes through it), not a line per guarded run.
                        Poll::Ready(Err(error)) if error.is_unavailable() => tracing::debug!(
                            distlock.error.class = error.class(),
                            error = observe::error(&error, names),
                            "release after the guarded work failed"
                        ),
                        Poll::Ready(Err(error)) => tracing::warn!(
                            distlock.error.class = error.class(),
                            error = observe::error(&error, names),
                            "release after the guarded work failed"
                        ),
                        Poll::Pending => {
                            ready!(bound.poll(cx));
                            tracing::debug!(
                                bound = ?RELEASE_WAIT,
                                "the release goes on in the background; the work's output goes out"
                            );
                        }
                    }
                    let StateOwn::Releasing { output, .. } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    return Poll::Ready(Ok(output));
                }
                StateProj::Done => panic!("GuardedRun polled after completion"),
            }
        }
    }
}

impl<G: Guarded, F: Future> fmt::Debug for GuardedRun<G, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Working { .. } => "Working",
            State::Releasing { .. } => "Releasing",
            State::Done => "Done",
        };
        f.debug_struct("GuardedRun").field("state", &state).finish()
    }
}
