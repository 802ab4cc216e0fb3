//! Reentrancy owner scopes.
//!
//! An owner scope is one logical caller: the macro opens one per call, the tower layer one
//! per request. Inside it, taking a lock the scope already holds succeeds at once with the
//! same fencing token; the Redis lock is released when the outermost hold ends. Scopes are
//! task-locals, so spawned tasks start outside any scope and are owners of their own.

use std::collections::HashMap;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;

use crate::lock::held::Held;

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// A held lock in a scope: the client's id and the lock's Redis key.
type HeldKey = (Arc<str>, Vec<u8>);

/// One owner: the locks it holds, keyed by client id and lock key.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    held: Mutex<HashMap<HeldKey, Arc<Held>>>,
}

impl Scope {
    /// The scope the current task runs in, if any.
    pub(crate) fn current() -> Option<Arc<Self>> {
        SCOPE.try_with(Arc::clone).ok()
    }

    /// Re-enters `key` if this scope holds it: bumps the hold count under the scope's lock,
    /// so it cannot race with the outermost release removing the entry.
    pub(crate) fn reenter(&self, client: &Arc<str>, key: &[u8]) -> Option<Arc<Held>> {
        let map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let held = map.get(&(Arc::clone(client), key.to_vec()))?;
        held.add_hold();
        Some(Arc::clone(held))
    }

    /// True when this scope holds any of `keys` (lock keys) of `client`.
    pub(crate) fn holds_any<'a>(
        &self,
        client: &Arc<str>,
        mut keys: impl Iterator<Item = &'a [u8]>,
    ) -> bool {
        let map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        keys.any(|key| map.contains_key(&(Arc::clone(client), key.to_vec())))
    }

    pub(crate) fn insert(&self, held: &Arc<Held>) {
        let mut map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(held.scope_key())
            .or_insert_with(|| Arc::clone(held));
    }

    /// Drops one hold; true when it was the outermost and the entry is gone.
    pub(crate) fn release_hold(&self, held: &Arc<Held>) -> bool {
        let mut map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let outermost = held.drop_hold();
        if outermost {
            let key = held.scope_key();
            if map.get(&key).is_some_and(|h| Arc::ptr_eq(h, held)) {
                map.remove(&key);
            }
        }
        outermost
    }
}

/// One reentrancy owner: a handle on an owner scope that futures can be run in.
///
/// Every future [entered](Self::enter) into the same scope (or a clone of it) is the same
/// owner: a lock taken in one of them is re-entered, not waited for, by the others, and the
/// Redis lock is released when the outermost hold ends. Cloning is cheap (an `Arc`).
///
/// This is the nameable form of [`scope`], for code that cannot `.await` an `async fn`: a
/// tower middleware, say, that takes a lock in the request's scope and then calls the inner
/// service in the same scope, holding both futures as fields of its own response future.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// use lock_core::OwnerScope;
///
/// let owner = OwnerScope::current_or_new();
/// let outer = owner.clone().enter(client.lock("order_42")).await?;
/// // Entering the same scope again is the same owner: this re-enters at once.
/// let inner = owner.enter(client.lock("order_42")).await?;
/// assert_eq!(outer.fencing_token(), inner.fencing_token());
/// # Ok(()) }
/// ```
///
/// Give a scope only to work that belongs to the same logical caller: a clone entered on
/// another task makes that task the same owner too, so it would re-enter this caller's
/// locks instead of being excluded by them.
#[derive(Clone, Debug)]
pub struct OwnerScope {
    scope: Arc<Scope>,
}

impl OwnerScope {
    /// The scope the caller runs in, if it runs in one; otherwise a new scope, a new owner.
    ///
    /// It reads the task-local of the current task, so call it where the work would run
    /// (in a middleware: in `call`, or in the response future's first poll).
    pub fn current_or_new() -> Self {
        Self {
            scope: Scope::current().unwrap_or_default(),
        }
    }

    /// Runs `fut` (a future, or a [`LockRequest`](crate::LockRequest)) inside this scope: while `fut` is polled, acquisitions are made as this
    /// owner. Entering a scope that is already the current one is harmless (it stays the
    /// same owner), and the caller's own scope, if any, is back in place once `fut` yields.
    ///
    /// # Cancel safety
    /// Dropping the returned future drops `fut` (inside the scope, so guards it drops are
    /// given back to this owner) and has no other effect.
    pub fn enter<F: IntoFuture>(self, fut: F) -> InScope<F::IntoFuture> {
        InScope {
            inner: SCOPE.scope(self.scope, fut.into_future()),
        }
    }
}

pin_project! {
    /// A future running inside an owner scope; made by [`OwnerScope::enter`].
    ///
    /// It is `fut` plus the scope's handle: no allocation, `Send` when `fut` is.
    #[must_use = "futures do nothing unless polled"]
    pub struct InScope<F> {
        #[pin]
        inner: TaskLocalFuture<Arc<Scope>, F>,
    }
}

impl<F: Future> Future for InScope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

impl<F> fmt::Debug for InScope<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InScope").finish_non_exhaustive()
    }
}

/// Runs `fut` inside a reentrancy owner scope.
///
/// If the caller already runs in a scope, `fut` joins it (so nested locked calls re-enter
/// instead of deadlocking); otherwise a new scope, a new owner, is opened for `fut`. The
/// choice is made when the returned future is first polled. [`OwnerScope`] is the same as
/// a value whose future can be named.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// lock_core::scope(async {
///     let outer = client.lock("order_42").await?;
///     let inner = client.lock("order_42").await?; // re-enters at once
///     assert_eq!(outer.fencing_token(), inner.fencing_token());
///     Ok(())
/// })
/// .await
/// # }
/// ```
///
/// # Cancel safety
/// As `fut`'s: dropping the scope drops `fut`, whose guards release as they drop.
pub async fn scope<F: Future>(fut: F) -> F::Output {
    OwnerScope::current_or_new().enter(fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_scope() -> Option<Arc<Scope>> {
        Scope::current()
    }

    #[tokio::test]
    async fn entering_a_scope_twice_is_the_same_owner() {
        assert!(current_scope().is_none());
        let owner = OwnerScope::current_or_new();
        let first = owner.clone().enter(async { current_scope() }).await;
        let second = owner.clone().enter(async { current_scope() }).await;
        let (first, second) = (first.expect("in scope"), second.expect("in scope"));
        assert!(Arc::ptr_eq(&first, &second));
        assert!(Arc::ptr_eq(&first, &owner.scope));
        // Out again once the entered future is done.
        assert!(current_scope().is_none());
    }

    #[tokio::test]
    async fn scope_joins_the_current_one_and_opens_a_new_one_outside() {
        let owner = OwnerScope::current_or_new();
        let (joined, nested) = owner
            .clone()
            .enter(async {
                let nested = OwnerScope::current_or_new();
                (scope(async { current_scope() }).await, nested)
            })
            .await;
        assert!(Arc::ptr_eq(&joined.expect("in scope"), &owner.scope));
        assert!(Arc::ptr_eq(&nested.scope, &owner.scope));
        let fresh = scope(async { current_scope() }).await.expect("in scope");
        assert!(!Arc::ptr_eq(&fresh, &owner.scope));
    }
}
