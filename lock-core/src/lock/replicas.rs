//! Replica acknowledgement ([`ReplicaAck`](crate::ReplicaAck)): after an acquisition, Redis
//! `WAIT` until enough replicas have the hold, else give it back — as Redisson's
//! `checkLockSyncedSlaves` does.
//!
//! `WAIT` blocks the connection it runs on and counts only that connection's writes, so it
//! runs on the client's replication connection, after a `TOUCH` of the hold there. The
//! `TOUCH` is written after every earlier write on its master (the grant, and a multi-lock's
//! other names, granted in the same call), so one `WAIT` covers them all.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lock::guard::LockGuard;
use crate::lock::time::later;
use crate::observe;
use crate::protocol::lock_calls;
use crate::transport::backend::Conn;

/// Pause after a failed `WAIT`, so a server that refuses at once is not asked in a busy loop.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Waits until `replicas` replicas acknowledged the hold of `guard`, for at most `timeout`.
/// With fewer, the hold is released (and handed on) and [`LockError::NotReplicated`]
/// returned.
///
/// The guard exists and the watchdog renews it while this waits, so dropping this future
/// releases the lock and a long `WAIT` does not eat the lease.
pub(crate) async fn replicated(
    guard: LockGuard,
    replicas: usize,
    timeout: Duration,
) -> Result<LockGuard, LockError> {
    let mut guards = replicated_all(vec![guard], replicas, timeout).await?;
    Ok(guards.pop().expect("one guard in, one out"))
}

/// [`replicated`] for holds granted together on one master (a multi-lock's names, in one
/// call): one `TOUCH` of the first and one `WAIT` cover them all. With fewer
/// acknowledgements every hold is released, last first, and the error names the first.
pub(crate) async fn replicated_all(
    guards: Vec<LockGuard>,
    replicas: usize,
    timeout: Duration,
) -> Result<Vec<LockGuard>, LockError> {
    let Some(first) = guards.first() else {
        return Ok(guards);
    };
    let acked = match acknowledged(first, replicas, timeout).await {
        Ok(acked) if acked >= replicas => return Ok(guards),
        Ok(acked) => acked,
        Err(error) => {
            // Released by the drops; the caller learns why.
            drop(guards);
            return Err(error);
        }
    };
    let (name, engine) = (first.name().clone(), first.held().engine.clone());
    for guard in guards.into_iter().rev() {
        let held = guard.held();
        let (label, names) = (held.identity.label.clone(), held.engine.config.trace_names);
        if let Err(error) = guard.release().await {
            tracing::debug!(
                distlock.lock.template = &*label,
                distlock.error.class = error.class(),
                error = observe::error(&error, names),
                "releasing an unreplicated hold failed"
            );
        }
    }
    engine.forget_replicas();
    Err(LockError::NotReplicated {
        name,
        acked,
        required: replicas,
    })
}

/// How many replicas acknowledged, asking in slices shorter than the command timeout (which
/// bounds every reply) until `replicas` did or `timeout` passed.
///
/// # Errors
/// The errors of the `TOUCH`, and [`LockError::Lost`] when the hold is already gone.
async fn acknowledged(
    guard: &LockGuard,
    replicas: usize,
    timeout: Duration,
) -> Result<usize, LockError> {
    let held = guard.held();
    let engine = &held.engine;
    let mut conn: Conn = engine.replication.clone().unwrap_or_else(|| engine.conn());
    let command_timeout = engine.config.command_timeout;
    let touch = lock_calls::touch(
        &held.identity.keys,
        &held.identity.owner,
        held.identity.lease,
    );
    let ttl: i64 = (touch.invoke(&mut conn, &held.name, command_timeout, command_timeout)).await?;
    if ttl <= 0 {
        held.mark_lost("the lock was gone before its replicas acknowledged it");
        return Err(held.lost_error());
    }
    let slice = (command_timeout / 2).max(Duration::from_millis(1));
    let deadline = later(Instant::now(), timeout);
    let mut acked = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match conn
            .wait_replicas(held.identity.keys.lock(), replicas, left.min(slice))
            .await
        {
            Ok(n) if n >= replicas => return Ok(n),
            Ok(n) => acked = n,
            Err(error) => {
                tracing::debug!(distlock.lock.template = &*held.identity.label,
                    distlock.lock.name = observe::name(&held.name, engine.config.trace_names), %error,
                    "WAIT failed");
                tokio::time::sleep(RETRY_PAUSE.min(left)).await;
            }
        }
        if Instant::now() >= deadline {
            return Ok(acked);
        }
    }
}
