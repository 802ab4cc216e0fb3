//! A hand-off's claim: a hold granted by message lives a short claim in Redis
//! ([`CLAIM`], `CLAIM_MS` in `library/common.lua`), not the waiter's lease, until its client extends
//! it. A waiter that died after it queued, or while its grant travelled, so blocks the name
//! for a claim; a live one extends the claim to its lease (one RENEW) before its local share
//! of the claim runs low.
//!
//! The local clock only knows that the grant came after the waiter's last attempt was sent,
//! so the claim is counted from there. A grant that finds at least half of that count left
//! is taken at once and extended later, from the background, if the hold lasts that long
//! (a short hold then costs no call at all); a grant that finds less (the waiter's last
//! attempt was long ago) is extended before the acquisition answers.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::held::Held;
use crate::lock::identity::HoldIdentity;
use crate::lock::time::{drift, later};
use crate::lock::watchdog;
use crate::protocol::kind::CLAIM_MS;
use crate::protocol::lock_calls;
use crate::protocol::name::LockName;

/// How long a hold granted by message lives until its client extends it.
pub(crate) const CLAIM: Duration = Duration::from_millis(CLAIM_MS);

/// The TTL a hand-off sets for a waiter with `lease`: the claim, or the lease if shorter.
pub(crate) fn claim_of(lease: Duration) -> Duration {
    lease.min(CLAIM)
}

/// The local deadline of a claim counted from `sent_at`, the waiter's last attempt (less the
/// drift margin of its lease, as [`Held::local_deadline`] counts).
fn claim_deadline(sent_at: Instant, lease: Duration) -> Instant {
    later(sent_at, claim_of(lease))
        .checked_sub(drift(lease))
        .unwrap_or(sent_at)
}

/// When a claim counted from `sent_at` is extended from the background: with half the claim
/// still left, room for a round trip on a loaded machine. `None` when that moment has passed
/// already: the claim is then extended before the grant is taken.
pub(crate) fn extend_at(sent_at: Instant, lease: Duration) -> Option<Instant> {
    let at = claim_deadline(sent_at, lease).checked_sub(claim_of(lease) / 2)?;
    (Instant::now() < at).then_some(at)
}

/// Extends a claim to `lease` now, for a grant taken only once extended. Answers the TTL
/// Redis confirmed (counted from the returned send time), or `None` when the claim had run
/// out: the hold is not this waiter's, which goes on waiting.
///
/// # Errors
/// The Redis error when the call failed: the caller's clean-up gives back the hold if the
/// claim was still there.
pub(crate) async fn extend_now(
    engine: &Engine,
    name: &LockName,
    identity: &HoldIdentity,
) -> Result<Option<(Duration, Instant)>, LockError> {
    let sent_at = Instant::now();
    let HoldIdentity {
        keys, owner, lease, ..
    } = identity;
    let lease = *lease;
    let call = lock_calls::renew([(keys, owner.as_str(), lease)]);
    let mut answers = engine.call_each(name, lease, call).await;
    // Hand-offs happen on one node (Redlock waiters are never granted by message).
    let reply = answers.swap_remove(0)?;
    Ok(match reply.ttl_ms(0) {
        Some(ttl) if ttl > 0 => Some((Duration::from_millis(ttl.unsigned_abs()), sent_at)),
        _ => None,
    })
}

/// Extends `held`'s claim at `at`, from the background, unless the hold ended by then;
/// a claim that ran out marks the hold lost, as a failed renewal does.
pub(crate) fn extend_later(held: &Arc<Held>, at: Instant) {
    let held = Arc::clone(held);
    tokio::spawn(async move {
        let ended = held.ended_signal();
        tokio::select! {
            () = ended => {}
            () = tokio::time::sleep_until(at) => {
                let engine = Arc::clone(&held.engine);
                watchdog::renew(&engine, std::slice::from_ref(&held)).await;
                if held.is_lost() {
                    held.claim_missed();
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_the_shorter_of_the_claim_and_the_lease() {
        assert_eq!(claim_of(Duration::from_secs(30)), CLAIM);
        assert_eq!(
            claim_of(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn a_fresh_grant_is_extended_later_a_stale_one_now() {
        let lease = Duration::from_secs(30);
        let sent_at = Instant::now();
        let at = extend_at(sent_at, lease).expect("fresh");
        // Half the claim is left when the background extension goes.
        assert_eq!(claim_deadline(sent_at, lease) - at, CLAIM / 2);
        let long_ago = Instant::now() - CLAIM;
        assert_eq!(extend_at(long_ago, lease), None);
    }
}
