//! The clean-up guard of an acquisition under way.

use std::sync::Arc;

use crate::lock::engine::Engine;
use crate::lock::identity::HoldIdentity;
use crate::observe;
use crate::protocol::name::LockName;
use crate::protocol::replies::ReleaseReply;

/// An acquisition under way. Unless disarmed, it leaves no trace in Redis: the owner is
/// taken out of the queue, and a hold it got without seeing the answer (a dropped future, a
/// lost or late reply, a grant nobody read) is released and handed on.
/// It borrows what the clean-up needs from the attempt and copies it only when it must run.
pub(crate) struct Pending<'a> {
    engine: &'a Arc<Engine>,
    /// Who the attempts acquired for (its holder metadata is part of the queue entry).
    identity: &'a HoldIdentity,
    armed: bool,
}

impl<'a> Pending<'a> {
    pub(crate) fn new(engine: &'a Arc<Engine>, identity: &'a HoldIdentity) -> Self {
        Self {
            engine,
            identity,
            armed: true,
        }
    }

    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// Leaves now, waiting for Redis (errors are left to the waiter's queue deadline).
    pub(crate) async fn leave(mut self) {
        self.armed = false;
        leave(self.engine, self.identity).await;
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
        let (engine, identity) = (Arc::clone(self.engine), self.identity.clone());
        let cleanups = engine.cleanups.clone();
        let leave = async move { leave(&engine, &identity).await };
        // Tracked: `shutdown()` waits for it, so a process that exits after it leaves no entry.
        cleanups.spawn_on(leave, &runtime);
    }
}

/// Takes `identity` out of its lock's queue, and releases (handing on) a hold it has there.
pub(crate) async fn leave(engine: &Engine, identity: &HoldIdentity) {
    let name = LockName::from(identity.keys.lock());
    let call = identity.release_call(engine.config.publish, true);
    for answer in engine.call_each(&name, identity.lease, call).await {
        match answer {
            Ok(ReleaseReply::NotHeld) => {}
            Ok(_) => {
                let names = engine.config.trace_names;
                tracing::debug!(
                    distlock.lock.template = &*identity.label,
                    distlock.lock.name = observe::name(&name, names),
                    "released a hold whose acquisition was not seen"
                );
            }
            Err(error) => (engine.health).log_failure(
                &error,
                "could not leave the lock's queue; the entry expires by itself",
            ),
        }
    }
}
