//! A multi-lock's uncontended path: every name free and nobody queued, all taken in one
//! function call (one server, or names of one Cluster slot; not Redlock), and, when replicas
//! are waited for, acknowledged by one `WAIT`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::guard::LockGuard;
use crate::lock::held::Acquired;
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::identity::{next_owner_number, owner_id, HoldIdentity};
use crate::lock::pending::Pending;
use crate::lock::replicas::replicated_all;
use crate::lock::scope::Scope;
use crate::observe::{observe, Event, MetricsLabel, Subject};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::lock_calls;
use crate::protocol::name::{LockKeys, LockName};
use crate::protocol::replies::MultiAcquireReply;

/// The capacity of a multi-lock's holds: they are exclusive locks, which have none (their
/// functions do not read it).
const EXCLUSIVE_CAPACITY: u32 = 1;

/// A multi-lock's uncontended path: every name in one function call.
pub(super) struct AtOnce {
    pub(super) engine: Arc<Engine>,
    pub(super) holds: Arc<HoldRegistry>,
    pub(super) names: Vec<LockName>,
    pub(super) keys: Vec<LockKeys>,
    pub(super) lease: Duration,
    pub(super) watchdog: bool,
    pub(super) meta: Arc<str>,
    pub(super) label: MetricsLabel,
    pub(super) scope: Option<Arc<Scope>>,
}

/// True when every lock of `keys` lives in one slot (always, off a Cluster).
#[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
pub(super) fn one_slot(engine: &Engine, keys: &[LockKeys]) -> bool {
    #[cfg(feature = "cluster")]
    if engine.conn().is_cluster() {
        let slot = |k: &LockKeys| redis::cluster_routing::Slot::for_key(k.lock());
        return keys.iter().all(|k| slot(k) == slot(&keys[0]));
    }
    true
}

/// Takes every name of `request` in one call when all are free with nobody queued:
/// `Ok(None)` when it does not apply or one is busy (nothing is then held).
///
/// Cancel safety: until the answer is read, dropping this leaves each name as the
/// one-by-one path's clean-up guard does (a grant nobody saw is released).
pub(super) async fn at_once(request: Option<AtOnce>) -> Result<Option<Vec<LockGuard>>, LockError> {
    let Some(r) = request else {
        return Ok(None);
    };
    // One slot, so one master: its replicas, as every name's own acquisition would wait.
    let replica_ack = r.engine.replica_ack(&r.names[0], r.keys[0].lock()).await?;
    let owner = owner_id(&r.engine.id, next_owner_number(), LockMode::Exclusive);
    let started = Instant::now();
    let call = lock_calls::multi_acquire(&r.keys, &owner, r.lease, &r.meta);
    // One identity per name: the same owner, each name's keys.
    let identities: Vec<HoldIdentity> = (r.keys.into_iter())
        .map(|keys| HoldIdentity {
            keys,
            owner: owner.clone(),
            capacity: EXCLUSIVE_CAPACITY,
            lease: r.lease,
            meta: Arc::clone(&r.meta),
            label: r.label.clone(),
        })
        .collect();
    let pending: Vec<Pending<'_>> = (identities.iter())
        .map(|identity| Pending::new(&r.engine, identity))
        .collect();
    let answer = r.engine.call_each(&r.names[0], r.lease, call).await.pop();
    let token = match answer {
        Some(Ok(MultiAcquireReply::Acquired { token })) => token,
        Some(Ok(MultiAcquireReply::Busy { .. })) => {
            pending.into_iter().for_each(Pending::disarm);
            return Ok(None);
        }
        // Armed: dropping `pending` undoes whatever the unseen answer granted.
        Some(Err(error)) => return Err(error),
        None => return Ok(None),
    };
    pending.into_iter().for_each(Pending::disarm);
    let names = r.names.clone();
    let guards = r.names.into_iter().zip(identities).map(|(name, identity)| {
        let acquired = Acquired {
            name,
            identity,
            token,
            watchdog: r.watchdog,
            sent_at: started,
            ttl: r.lease,
            extend_at: None,
            trace_parent: tracing::Span::current(),
            ended: CancellationToken::new(),
        };
        LockGuard::granted(&r.engine, &r.holds, acquired, r.scope.clone())
    });
    let guards: Vec<LockGuard> = guards.collect();
    let guards = match replica_ack {
        Some((replicas, timeout)) => replicated_all(guards, replicas, timeout).await,
        None => Ok(guards),
    };
    // Each name's acquisition ends here, with the replicas' answer.
    let traced = r.engine.config.trace_names;
    for name in &names {
        let ended = Event::AcquisitionEnded {
            result: guards.as_ref().map(|_| ()),
            waited: started.elapsed(),
            contended: false,
        };
        observe(Subject::new(&r.label, name, traced, None), ended);
    }
    guards.map(Some)
}
