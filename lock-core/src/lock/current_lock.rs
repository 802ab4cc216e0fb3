//! The lock the current task works under: what [`current_lock`] answers inside
//! [`LockRequest::run`](crate::LockRequest::run) (and so inside the macro and the tower
//! layer), set by [`with_lock_info`]. A task-local, so spawned tasks start without one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;

use crate::lock::held::Held;
use crate::protocol::name::LockName;

tokio::task_local! {
    static CURRENT: LockInfo;
}

/// The name and fencing token of a held lock, and a handle on the hold for
/// [guarded writes](Self::write). Equal when name and token are.
#[derive(Clone)]
pub struct LockInfo {
    name: LockName,
    token: u64,
    /// The hold, while it lasts: the info does not keep it alive.
    held: Weak<Held>,
}

impl PartialEq for LockInfo {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, self.token) == (&other.name, other.token)
    }
}

impl Eq for LockInfo {}

impl fmt::Debug for LockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockInfo")
            .field("name", &self.name)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl LockInfo {
    #[cfg(test)]
    pub(crate) fn new(name: LockName, token: u64) -> Self {
        Self {
            name,
            token,
            held: Weak::new(),
        }
    }

    /// The info of `held`.
    pub(crate) fn of(held: &Arc<Held>) -> Self {
        Self {
            name: held.name.clone(),
            token: held.token,
            held: Arc::downgrade(held),
        }
    }

    /// The hold, unless it has ended here.
    pub(crate) fn held(&self) -> Option<Arc<Held>> {
        self.held.upgrade()
    }

    /// The lock's name.
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The fencing token of this hold (see [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)).
    pub fn fencing_token(&self) -> u64 {
        self.token
    }
}

/// The innermost lock held by [`LockRequest::run`](crate::LockRequest::run) (and so by the
/// `#[distributed_lock]` macro and the tower layer) around the current task.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// client.lock("invoice_9").run(async {
///     let token = lock_core::current_lock().expect("inside run").fencing_token();
///     println!("writing with fencing token {token}");
/// }).await?;
/// # Ok(()) }
/// ```
pub fn current_lock() -> Option<LockInfo> {
    CURRENT.try_with(Clone::clone).ok()
}

/// Runs `fut` with [`current_lock`] returning `info` inside it (and in nothing it spawns).
///
/// [`LockRequest::run`](crate::LockRequest::run) uses it around the guarded work; call it
/// yourself when you hold a [`LockGuard`](crate::LockGuard) around work that should see it
/// (`with_lock_info(guard.info(), work)`), as the tower layer does. It only sets what
/// `current_lock` answers: it neither takes nor proves the lock, and an [`OwnerScope`](crate::OwnerScope) is
/// what makes nested acquisitions re-enter. Nested calls shadow the outer `info` until the
/// inner future yields.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// use lock_core::{current_lock, with_lock_info};
///
/// let guard = client.lock("invoice_9").await?;
/// let work = async { current_lock().map(|lock| lock.fencing_token()) };
/// let token = with_lock_info(guard.info(), work).await;
/// assert_eq!(token, Some(guard.fencing_token()));
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Dropping the returned future drops `fut` and has no other effect.
pub fn with_lock_info<F: Future>(info: LockInfo, fut: F) -> WithLockInfo<F> {
    WithLockInfo {
        inner: CURRENT.scope(info, fut),
    }
}

pin_project! {
    /// A future that sees a [`LockInfo`] as its [`current_lock`]; made by [`with_lock_info`].
    ///
    /// It is `fut` plus the info: no allocation, `Send` when `fut` is.
    #[must_use = "futures do nothing unless polled"]
    pub struct WithLockInfo<F> {
        #[pin]
        inner: TaskLocalFuture<LockInfo, F>,
    }
}

impl<F: Future> Future for WithLockInfo<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

impl<F> fmt::Debug for WithLockInfo<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithLockInfo").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lock_info_nests_and_is_restored() {
        let outer = LockInfo::new(LockName::from("outer"), 1);
        let inner = LockInfo::new(LockName::from("inner"), 2);
        assert_eq!(current_lock(), None);
        let seen = with_lock_info(outer.clone(), async {
            let before = current_lock();
            let nested = with_lock_info(inner.clone(), async { current_lock() }).await;
            (before, nested, current_lock())
        })
        .await;
        assert_eq!(seen, (Some(outer.clone()), Some(inner), Some(outer)));
        assert_eq!(current_lock(), None);
    }
}
