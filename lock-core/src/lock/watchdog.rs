//! One renewal task per client: every tick, every held watchdog lock is renewed in one
//! round trip (a batch call per 512 locks, all batches in flight at once on the
//! multiplexed connection), not one timer per lock. On a Cluster a function call may only touch
//! one slot, so batches are made per slot (still all in flight at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::held::Held;
use crate::lock::quorum::renewal;
use crate::lock::time::later;
use crate::protocol::calls;
use crate::protocol::replies::RenewReply;
use crate::transport::backend::Conn;

/// Locks per renewal call: keeps each call short so Redis never stalls on one.
const BATCH: usize = 512;

/// The locks the watchdog keeps alive, by the address of their shared state.
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    held: Mutex<HashMap<usize, Weak<Held>>>,
}

impl Watchdog {
    pub(crate) fn register(&self, held: &Arc<Held>) {
        self.map().insert(addr(held), Arc::downgrade(held));
    }

    /// Stops renewing `held` from now on.
    pub(crate) fn unregister(&self, held: &Held) {
        self.map().remove(&addr(held));
    }

    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Weak<Held>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The locks to renew now; those past the client's maximum hold are left to expire.
    fn due(&self, max_hold: Option<Duration>) -> Vec<Arc<Held>> {
        let now = Instant::now();
        let mut map = self.map();
        // A lost hold is never renewed again, even if Redis still has it: the guard has said
        // it is gone, and a late renewal must not bring its deadline back.
        map.retain(|_, weak| weak.upgrade().is_some_and(|held| !held.is_lost()));
        map.values()
            .filter_map(Weak::upgrade)
            .filter(|held| {
                if now >= held.local_deadline() {
                    held.mark_lost("its lease ran out without a confirmed renewal");
                    return false;
                }
                max_hold.is_none_or(|max| now < later(held.acquired_at, max))
            })
            .collect()
    }
}

fn addr(held: &Held) -> usize {
    std::ptr::from_ref(held) as usize
}

/// Runs until `stop` fires or the client is gone.
pub(crate) async fn run(client: Weak<Engine>, interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(client) = client.upgrade() else {
            return;
        };
        let due = client.watchdog.due(client.config.max_hold);
        if !due.is_empty() {
            renew(&client, &due).await;
        }
    }
}

/// Renews `due` and settles each lock on the answer: confirmed TTL, or lost.
async fn renew(client: &Engine, due: &[Arc<Held>]) {
    let sent_at = Instant::now();
    let groups = batches(due, &client.conn());
    let batches = groups.iter().map(|batch| async move {
        let call = calls::renew(batch.iter().map(|h| (&h.keys, h.owner.as_str(), h.lease)));
        // Errors name the batch's first lock (the log line gives the batch size); watchdog
        // locks all have the client's lease.
        let first = &batch[0];
        (
            batch,
            client.eval_each(&first.name, first.lease, call).await,
        )
    });
    for (batch, answers) in join_all(batches).await {
        for error in answers.iter().filter_map(|a| a.as_ref().err()) {
            // Not lost yet: the local deadline decides if Redis stays unreachable.
            (client.health).log_failure(error, "renewal failed");
        }
        settle(batch, &answers, sent_at);
    }
    tracing::trace!(locks = due.len(), "renewed");
}

/// Splits the locks into function calls: per 512 locks, and per slot on a Cluster.
#[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
fn batches(due: &[Arc<Held>], conn: &Conn) -> Vec<Vec<Arc<Held>>> {
    #[cfg(feature = "cluster")]
    if conn.is_cluster() {
        let mut by_slot: HashMap<_, Vec<Arc<Held>>> = HashMap::new();
        for held in due {
            by_slot
                .entry(redis::cluster_routing::Slot::for_key(held.keys.lock()))
                .or_default()
                .push(Arc::clone(held));
        }
        return by_slot
            .into_values()
            .flat_map(|group| group.chunks(BATCH).map(<[_]>::to_vec).collect::<Vec<_>>())
            .collect();
    }
    due.chunks(BATCH).map(<[_]>::to_vec).collect()
}

/// Settles each lock of a batch from every node's answers: confirmed by a quorum, lost
/// when a majority no longer has it, else left to its local deadline.
fn settle(batch: &[Arc<Held>], answers: &[Result<RenewReply, LockError>], sent_at: Instant) {
    for (i, held) in batch.iter().enumerate() {
        let ttls = answers
            .iter()
            .map(|a| a.as_ref().ok().and_then(|reply| reply.ttl_ms(i)));
        let outcome = renewal(ttls, answers.len());
        held.settle(
            outcome,
            sent_at,
            "a renewal found the lock deleted, expired or taken over",
        );
    }
}
