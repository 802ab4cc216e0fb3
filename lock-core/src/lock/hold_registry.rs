//! Every hold of one client, for what concerns them all: the watchdog renews those without
//! an explicit lease, a revocation names one by owner and key, a shutdown releases them all
//! and takes the client's [queued](super::queued) waits out of their queues.
//!
//! The registry sits above the holds and the engine: a hold does not know it. It keeps weak
//! references and forgets ended holds by itself (when it has grown to twice what was alive
//! at its last sweep), so a hold that ends needs no call back into it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::lock::held::Held;
use crate::lock::identity::HoldIdentity;
use crate::lock::queued::Queued;

/// Fewest entries at which a sweep runs: small registries are never swept.
const MIN_SWEEP: usize = 64;

/// The holds of a client.
#[derive(Debug)]
pub(crate) struct HoldRegistry {
    state: Mutex<State>,
    /// Set once the revocation listener was started (at the first hold).
    listening: AtomicBool,
    /// The waits queued in Redis.
    pub(crate) queued: Arc<Queued>,
    /// Fires at the shutdown: waiting acquisitions leave their queues and end.
    closing: CancellationToken,
}

#[derive(Debug)]
struct State {
    /// Ended and dropped holds stay until the next sweep; readers skip them.
    held: Vec<Weak<Held>>,
    /// Sweep when `held` reaches this length.
    sweep_at: usize,
    /// The client shut down: no hold may be added.
    closed: bool,
}

impl Default for HoldRegistry {
    fn default() -> Self {
        let state = State {
            held: Vec::new(),
            sweep_at: MIN_SWEEP,
            closed: false,
        };
        Self {
            state: Mutex::new(state),
            listening: AtomicBool::new(false),
            queued: Arc::default(),
            closing: CancellationToken::new(),
        }
    }
}

impl HoldRegistry {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `held`; false once the client shut down (the hold must then end at once).
    pub(crate) fn insert(&self, held: &Arc<Held>) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        if state.held.len() >= state.sweep_at {
            state.held.retain(|weak| live(weak).is_some());
            state.sweep_at = (2 * state.held.len()).max(MIN_SWEEP);
        }
        state.held.push(Arc::downgrade(held));
        true
    }

    /// The holds that have not ended on this side.
    fn live(&self) -> Vec<Arc<Held>> {
        self.state().held.iter().filter_map(live).collect()
    }

    /// The holds the watchdog renews: those taken without an explicit lease, not lost. A
    /// lost hold is never renewed again, even if Redis still has it: its guard has said it
    /// is gone, and a late renewal must not bring its deadline back.
    pub(crate) fn renewed(&self) -> Vec<Arc<Held>> {
        let mut held = self.live();
        held.retain(|h| h.watchdog && !h.is_lost());
        held
    }

    /// The holds of `owner` on the lock `key` (one; none once it ended).
    pub(crate) fn find(&self, owner: &str, key: &[u8]) -> Vec<Arc<Held>> {
        let mut held = self.live();
        held.retain(|h| h.identity.owner == owner && h.identity.keys.lock() == key);
        held
    }

    /// Refuses every later hold, wakes the waiting acquisitions, and hands over the current
    /// holds and the queued waits.
    pub(crate) fn close(&self) -> (Vec<Arc<Held>>, Vec<HoldIdentity>) {
        let mut state = self.state();
        state.closed = true;
        self.closing.cancel();
        let held = state.held.drain(..).filter_map(|weak| live(&weak));
        (held.collect(), self.queued.take())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// Resolves once the client is shutting down.
    pub(crate) fn closing(&self) -> WaitForCancellationFuture<'_> {
        self.closing.cancelled()
    }

    /// True the first time only: whoever gets it starts the revocation listener.
    pub(crate) fn start_listening(&self) -> bool {
        !self.listening.swap(true, Ordering::AcqRel)
    }
}

/// The hold, unless it was dropped or ended on this side (released, lingered, completed).
fn live(weak: &Weak<Held>) -> Option<Arc<Held>> {
    weak.upgrade().filter(|held| !held.is_released())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::lock::held::Acquired;
    use crate::protocol::kind::mode::LockMode;
    use crate::{LockClient, LockName};

    /// A hold of the name `h<n>` as an acquisition would make it (no Redis involved).
    fn hold(client: &LockClient, n: usize, watchdog: bool) -> Arc<Held> {
        let name = LockName::from(format!("h{n}"));
        let keys = client
            .engine
            .keys(&name, LockMode::Exclusive)
            .expect("a valid name");
        let identity = HoldIdentity {
            keys,
            owner: format!("o:{n}"),
            capacity: 1,
            lease: Duration::from_secs(30),
            meta: Arc::from(""),
            label: Cow::Borrowed("default"),
        };
        let acquired = Acquired {
            name,
            identity,
            token: 1,
            watchdog,
            sent_at: Instant::now(),
            ttl: Duration::from_secs(30),
            extend_at: None,
            trace_parent: tracing::Span::none(),
            ended: CancellationToken::new(),
        };
        Held::new(Arc::clone(&client.engine), acquired)
    }

    fn entries(holds: &HoldRegistry) -> usize {
        holds.state().held.len()
    }

    // A client of a port nothing listens on: it connects lazily, and these tests send nothing.
    fn client() -> LockClient {
        LockClient::new("redis://127.0.0.1:1").expect("a lazy client")
    }

    #[tokio::test]
    async fn ended_and_dropped_holds_are_swept_out() {
        let (client, holds) = (client(), HoldRegistry::default());
        let kept: Vec<_> = (0..10).map(|n| hold(&client, n, true)).collect();
        kept.iter().for_each(|h| assert!(holds.insert(h)));
        for n in 10..10_000 {
            let held = hold(&client, n, true);
            assert!(holds.insert(&held));
            if n % 2 == 0 {
                assert!(held.end_locally());
            }
        }
        assert_eq!(holds.live().len(), 10);
        assert!(entries(&holds) <= MIN_SWEEP, "{} entries", entries(&holds));
    }

    #[tokio::test]
    async fn readers_skip_ended_and_lost_holds() {
        let (client, holds) = (client(), HoldRegistry::default());
        let held: Vec<_> = (0..4).map(|n| hold(&client, n, n != 3)).collect();
        held.iter().for_each(|h| assert!(holds.insert(h)));
        held[0].end_locally();
        held[1].mark_lost("a test");
        // Renewed: not ended, not lost, no explicit lease.
        let renewed: Vec<_> = holds
            .renewed()
            .iter()
            .map(|h| h.identity.owner.clone())
            .collect();
        assert_eq!(renewed, ["o:2"]);
        assert_eq!(holds.find("o:1", held[1].identity.keys.lock()).len(), 1);
        assert!(holds.find("o:0", held[0].identity.keys.lock()).is_empty());
        // The shutdown hands over what has not ended (a lost hold is still released).
        let closed: Vec<_> = holds
            .close()
            .0
            .iter()
            .map(|h| h.identity.owner.clone())
            .collect();
        assert_eq!(closed, ["o:1", "o:2", "o:3"]);
        assert!(!holds.insert(&hold(&client, 9, true)));
    }
}
