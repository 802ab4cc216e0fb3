//! One renewal task per client: every tick, every held watchdog lock is renewed in one
//! round trip (a batch call per 512 locks, all batches in flight at once on the
//! multiplexed connection), not one timer per lock. On a Cluster a function call may only touch
//! one slot, so batches are made per slot (still all in flight at once).

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::held::Held;
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::quorum::renewal;
use crate::lock::time::later;
use crate::protocol::lock_calls;
use crate::protocol::replies::RenewReply;
use crate::transport::backend::Conn;

/// Locks per renewal call: keeps each call short so Redis never stalls on one.
const BATCH: usize = 512;

/// The locks to renew now; those past the client's maximum hold are left to expire.
fn due(holds: &HoldRegistry, max_hold: Option<Duration>) -> Vec<Arc<Held>> {
    let now = Instant::now();
    let mut due = holds.renewed();
    due.retain(|held| {
        if now >= held.local_deadline() {
            held.mark_lost("its lease ran out without a confirmed renewal");
            return false;
        }
        max_hold.is_none_or(|max| now < later(held.acquired_at, max))
    });
    due
}

/// Starts the client's renewal task: it renews `holds` through `engine` every `interval`,
/// and ends with the engine (whose holds all ended then) or its stop signal.
pub(crate) fn start(engine: &Arc<Engine>, holds: &Arc<HoldRegistry>) {
    let task = run(
        Arc::downgrade(engine),
        Arc::clone(holds),
        engine.config.watchdog_interval,
        engine.stop.child_token(),
    );
    tokio::spawn(task);
}

/// Runs until `stop` fires or the client is gone.
async fn run(
    engine: Weak<Engine>,
    holds: Arc<HoldRegistry>,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        let due = due(&holds, engine.config.max_hold);
        if !due.is_empty() {
            renew(&engine, &due).await;
        }
    }
}

/// Renews `due` and settles each lock on the answer: confirmed TTL, or lost.
pub(crate) async fn renew(client: &Engine, due: &[Arc<Held>]) {
    let sent_at = Instant::now();
    let groups = batches(due, &client.conn());
    let batches = groups.iter().map(|batch| async move {
        let identities = batch.iter().map(|h| &h.identity);
        let call = lock_calls::renew(identities.map(|i| (&i.keys, i.owner.as_str(), i.lease)));
        // Errors name the batch's first lock (the log line gives the batch size); watchdog
        // locks all have the client's lease.
        let (name, lease) = (&batch[0].name, batch[0].identity.lease);
        (batch, client.call_each(name, lease, call).await)
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
        let mut by_slot: std::collections::HashMap<_, Vec<Arc<Held>>> = Default::default();
        for held in due {
            let slot = redis::cluster_routing::Slot::for_key(held.identity.keys.lock());
            by_slot.entry(slot).or_default().push(Arc::clone(held));
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
