//! The client's waits that are queued in Redis, so that a shutdown takes every one of them
//! out of its queue before it returns: a service that stops leaves no place in a queue
//! behind, whatever its waiting tasks do next (a process exits right after its shutdown,
//! and a task spawned to leave a queue would never run).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::lock::identity::HoldIdentity;

/// The queued waits of a client.
#[derive(Debug, Default)]
pub(crate) struct Queued {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// Who each wait acquires for: what leaving its queue names.
    waits: HashMap<u64, HoldIdentity>,
}

/// A wait's entry in the registry, removed when dropped (the wait ended, whichever way).
#[derive(Debug)]
pub(crate) struct Entry {
    queued: Arc<Queued>,
    id: u64,
}

impl Queued {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a wait about to queue.
    pub(crate) fn enter(self: &Arc<Self>, wait: HoldIdentity) -> Entry {
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        state.waits.insert(id, wait);
        Entry {
            queued: Arc::clone(self),
            id,
        }
    }

    /// Every wait recorded now, for the shutdown to take out of its queue.
    pub(crate) fn take(&self) -> Vec<HoldIdentity> {
        self.state().waits.drain().map(|(_, wait)| wait).collect()
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.queued.state().waits.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use super::*;
    use crate::protocol::kind::mode::LockMode;
    use crate::protocol::name::LockKeys;

    fn wait(owner: &str) -> HoldIdentity {
        HoldIdentity {
            keys: LockKeys::for_key(b"k", LockMode::Exclusive, false),
            capacity: 1,
            owner: owner.to_owned(),
            lease: Duration::from_secs(30),
            meta: Arc::from(""),
            label: Cow::Borrowed("default"),
        }
    }

    #[test]
    fn a_wait_is_recorded_until_its_entry_drops() {
        let queued = Arc::new(Queued::default());
        let first = queued.enter(wait("a:1"));
        let _second = queued.enter(wait("a:2"));
        drop(first);
        let taken = queued.take();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].owner, "a:2");
        assert!(queued.take().is_empty());
    }
}
