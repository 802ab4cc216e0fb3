//! [`InFlight`]: a key held for its request, until its result is stored or it is released.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::idempotency::error::IdempotencyError;
use crate::idempotency::fingerprint::Fingerprint;
use crate::idempotency::record::{self, StoredKind};
use crate::lock::guard::{LockGuard, Lost, Release};
use crate::lock::held::Held;
use crate::protocol::complete::{complete, Completed, Hold};
use crate::protocol::name::LockName;

/// A key in flight for its caller: the in-flight lock's guard and what completing needs.
/// Dropping it releases the lock and stores nothing (the key is free for a retry).
#[must_use = "dropping it releases the key without storing a result"]
pub struct InFlight {
    pub(crate) guard: LockGuard,
    pub(crate) key: LockName,
    pub(crate) record: Vec<u8>,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) retention: Duration,
}

impl InFlight {
    /// The in-flight lock's guard: its fencing token is what the request's effects should
    /// be guarded with.
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Resolves when the in-flight lock can no longer be assumed held
    /// ([`LockGuard::lost`]).
    pub fn lost(&self) -> Lost {
        self.guard.lost()
    }

    /// Releases the key without storing anything (a failed request): a retry runs
    /// again. Dropping the `InFlight` does the same in the background.
    pub fn release(self) -> Release {
        self.guard.release()
    }

    /// Stores `payload` as the key's result with the retention, and releases the in-flight
    /// lock, in one function call: only while this hold is current.
    ///
    /// # Errors
    /// [`IdempotencyError::Lost`] when the hold was lost (its lease ran out, or another
    /// request took the key over): nothing was stored; and Redis errors (the lock then
    /// expires with its lease, and nothing may have been stored).
    pub async fn complete(self, payload: &[u8]) -> Result<(), IdempotencyError> {
        self.store(StoredKind::Result, payload).await
    }

    /// Stores the mark of a result too large to keep (with `payload`, what is kept
    /// instead), as [`complete`](Self::complete) does.
    ///
    /// # Errors
    /// As [`complete`](Self::complete).
    pub async fn complete_too_large(self, payload: &[u8]) -> Result<(), IdempotencyError> {
        self.store(StoredKind::TooLarge, payload).await
    }

    async fn store(self, kind: StoredKind, payload: &[u8]) -> Result<(), IdempotencyError> {
        let value = record::encode(kind, &self.fingerprint, payload);
        let lost = || IdempotencyError::Lost {
            key: self.key.clone(),
        };
        // An inner guard of a scope cannot end the hold: a scope that holds the key twice
        // is one request, and its outermost guard completes it.
        let Some(held) = self.guard.into_outermost() else {
            return Err(lost());
        };
        if !held.end_locally() {
            return Err(lost());
        }
        match complete_in_redis(&held, &self.record, &value, self.retention).await? {
            Completed::Stored => Ok(()),
            Completed::NotCurrent => Err(lost()),
        }
    }
}

/// Runs COMPLETE for `held`, within the command timeout: even while Redis is known down (it
/// ends the hold, as a release does, and the result is worth a try).
async fn complete_in_redis(
    held: &Arc<Held>,
    record: &[u8],
    value: &[u8],
    retention: Duration,
) -> Result<Completed, LockError> {
    let hold = Hold {
        keys: &held.identity.keys,
        owner: &held.identity.owner,
        token: held.token,
        lease: held.identity.lease,
    };
    let publish = held.engine.config.publish;
    let call = complete(&hold, record, value, retention, publish);
    held.engine.call_one(&held.name, call).await
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("key", &self.key)
            .field("fencing_token", &self.guard.fencing_token())
            .field("retention", &self.retention)
            .finish()
    }
}
