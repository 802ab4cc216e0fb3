//! Running work under a hold: what [`LockRequest::run`](crate::LockRequest::run) and
//! [`MultiLockRequest::run`](crate::MultiLockRequest::run) share.

use std::future::Future;

use crate::error::LockError;
use crate::lock::request::OnLost;
use crate::lock::scope::{with_lock_info, LockInfo};

/// A hold that work can run under: a [`LockGuard`](crate::LockGuard) or a
/// [`MultiLockGuard`](crate::MultiLockGuard).
pub(crate) trait Guarded: Sized {
    /// Resolves when the hold can no longer be assumed held.
    type Lost: Future<Output = ()> + Send;
    fn lost(&self) -> Self::Lost;
    fn lost_error(&self) -> LockError;
    /// What [`current_lock`](crate::current_lock) answers inside the work.
    fn info(&self) -> LockInfo;
    fn release(self) -> impl Future<Output = Result<(), LockError>> + Send;
}

/// Runs `work` under `guard`, then releases it. With [`OnLost::Abort`] the work is dropped
/// at its next `.await` once the hold is lost, and [`LockError::Lost`] returned — also when
/// the loss is known only as the work completes (a process paused past its lease: both are
/// ready when it resumes) or only at the release (the hold was gone, e.g. force-released,
/// before a renewal could notice): the caller asked to be told. Any other failed release
/// after the work completed is logged, not returned: the work is done and its output is more
/// useful to the caller.
pub(crate) async fn run_under<G: Guarded, F: Future>(
    guard: G,
    on_lost: OnLost,
    work: F,
) -> Result<F::Output, LockError> {
    let lost = guard.lost();
    let work = with_lock_info(guard.info(), work);
    let output = match on_lost {
        OnLost::Continue => work.await,
        OnLost::Abort => tokio::select! {
            // A loss first: after a pause both are ready, and the hold did not last the
            // work (found by distlock-verify's honesty checker).
            biased;
            // Only a loss ends the hold here: this guard keeps the scope's count up.
            () = lost => return Err(guard.lost_error()),
            output = work => output,
        },
    };
    let lost_error = guard.lost_error();
    match guard.release().await {
        Ok(()) => {}
        Err(LockError::NotHeld { .. }) if on_lost == OnLost::Abort => return Err(lost_error),
        Err(error) => tracing::warn!(%error, "release after the guarded work failed"),
    }
    Ok(output)
}
