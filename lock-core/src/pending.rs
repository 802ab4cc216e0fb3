//! The clean-up guard of an acquisition under way.

use std::sync::Arc;
use std::time::Duration;

use crate::acquire::Attempter;
use crate::client::ClientInner;
use crate::name::{LockKeys, LockName};
use crate::scripts;

/// An acquisition under way. Unless disarmed, it leaves no trace in Redis: the owner is
/// taken out of the queue, and a hold it got without seeing the answer (a dropped future, a
/// lost or late reply, a grant nobody read) is released and handed on.
/// It borrows the attempt and copies what the clean-up needs only when it must run.
pub(crate) struct Pending<'a> {
    attempter: &'a Attempter<'a>,
    armed: bool,
}

impl<'a> Pending<'a> {
    pub(crate) fn new(attempter: &'a Attempter<'a>) -> Self {
        Self {
            attempter,
            armed: true,
        }
    }

    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// Leaves now, waiting for Redis (errors are left to the waiter's queue deadline).
    pub(crate) async fn leave(mut self) {
        self.armed = false;
        let a = self.attempter;
        leave(a.inner, a.keys, &a.owner, a.lease, &a.meta).await;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let a = self.attempter;
        let (inner, keys, lease) = (Arc::clone(a.inner), a.keys.clone(), a.lease);
        let (owner, meta) = (a.owner.clone(), a.meta.clone());
        runtime.spawn(async move { leave(&inner, &keys, &owner, lease, &meta).await });
    }
}

pub(crate) async fn leave(
    inner: &ClientInner,
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    meta: &str,
) {
    let name = LockName::from(keys.lock.clone());
    let call = scripts::release(keys, owner, lease, meta, inner.config.publish);
    for answer in inner.eval_each::<i64>(&name, lease, call).await {
        match answer {
            Ok(0) => {}
            Ok(_) => {
                tracing::debug!(lock = %name, "released a hold whose acquisition was not seen")
            }
            Err(error) => tracing::warn!(lock = %name, %error,
                "could not leave the lock's queue; the entry expires by itself"),
        }
    }
}
