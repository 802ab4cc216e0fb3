//! Every hold of one client, for what concerns them all: a revocation names one by owner
//! and key, a shutdown releases them all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::lock::held::Held;

/// The holds of a client, by the address of their shared state (as the watchdog's).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    state: Mutex<State>,
    /// Set once the revocation listener was started (at the first hold).
    listening: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    held: HashMap<usize, Weak<Held>>,
    /// The client shut down: no hold may be added.
    closed: bool,
}

impl Holds {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `held`; false once the client shut down (the hold must then end at once).
    pub(crate) fn insert(&self, held: &Arc<Held>) -> bool {
        let mut state = self.state();
        if !state.closed {
            state.held.insert(addr(held), Arc::downgrade(held));
        }
        !state.closed
    }

    pub(crate) fn remove(&self, held: &Held) {
        self.state().held.remove(&addr(held));
    }

    /// The holds of `owner` on the lock `key` (one; none once it ended).
    pub(crate) fn find(&self, owner: &str, key: &[u8]) -> Vec<Arc<Held>> {
        let state = self.state();
        (state.held.values())
            .filter_map(Weak::upgrade)
            .filter(|held| held.owner == owner && held.keys.lock() == key)
            .collect()
    }

    /// Refuses every later hold and hands over the current ones.
    pub(crate) fn close(&self) -> Vec<Arc<Held>> {
        let mut state = self.state();
        state.closed = true;
        state
            .held
            .drain()
            .filter_map(|(_, w)| w.upgrade())
            .collect()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// True the first time only: whoever gets it starts the revocation listener.
    pub(crate) fn start_listening(&self) -> bool {
        !self.listening.swap(true, Ordering::AcqRel)
    }
}

fn addr(held: &Held) -> usize {
    std::ptr::from_ref(held) as usize
}
