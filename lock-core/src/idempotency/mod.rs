//! Idempotency keys on top of the lock: one completed execution per key within a
//! retention, a stored result for the duplicates that come later.
//!
//! A key has three states in Redis, all in one Cluster slot:
//!
//! - **free**: nothing stored; the next request takes the key's in-flight lock;
//! - **in flight**: the lock `<key>` is held (watchdog-renewed, fenced); duplicates are
//!   told to retry later ([`IdempotencyError::InFlight`]);
//! - **completed**: the record `distlock__idem:{<lock key>}` holds the request's
//!   fingerprint and result, with a TTL of the retention; it is written by the same function
//!   call that releases the in-flight lock, and only while that hold is current (its owner and
//!   fencing token), so a hold that was lost and taken over never stores over its
//!   successor. Duplicates get the stored result; another request with the key is refused
//!   ([`IdempotencyError::Mismatch`]).
//!
//! [`LockClient::idempotent`](crate::LockClient::idempotent) runs a future under that protocol (the `serde` feature);
//! [`LockClient::idempotency`] gives its steps to middleware (lock-tower's
//! `IdempotencyLayer`).

pub(crate) mod error;
pub(crate) mod fingerprint;
pub(crate) mod in_flight;
pub(crate) mod record;
#[cfg(feature = "serde")]
pub(crate) mod run;

use std::fmt;
use std::time::Duration;

use crate::client::handle::LockClient;
use crate::error::LockError;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;

pub use error::IdempotencyError;
pub use fingerprint::{Fingerprint, FingerprintBuilder};
pub use in_flight::InFlight;
pub use record::StoredKind;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use run::{IdempotentRequest, Outcome};

/// The prefix of a record's key, before `{<lock key>}` (the lock's slot).
const RECORD_PREFIX: &str = "distlock__idem:";

/// The metrics label of every in-flight hold (keys are unbounded: never a label).
const FAMILY: &str = "idempotency";

/// How long a completed key's record is kept by default: 24 hours.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

impl LockClient {
    /// The steps of the idempotency protocol for `key` ([`Idempotency::begin`], then
    /// [`InFlight::complete`]), for middleware; code that runs a future wants
    /// [`idempotent`](Self::idempotent).
    pub fn idempotency(&self, key: impl Into<LockName>) -> Idempotency {
        Idempotency {
            client: self.clone(),
            key: key.into(),
            retention: DEFAULT_RETENTION,
            lease: None,
        }
    }
}

/// One idempotency key's protocol: made by [`LockClient::idempotency`].
#[derive(Clone)]
pub struct Idempotency {
    client: LockClient,
    key: LockName,
    retention: Duration,
    lease: Option<Duration>,
}

/// What [`Idempotency::begin`] found.
#[derive(Debug)]
pub enum Begin {
    /// The key was free and is now in flight for the caller: run the request, then
    /// [`complete`](InFlight::complete) it (or drop the hold to store nothing).
    Run(InFlight),
    /// The key completed with the same fingerprint: this is what it stored.
    Replay(Stored),
}

/// A completed key's stored result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    kind: StoredKind,
    payload: Vec<u8>,
}

impl Stored {
    /// What was stored: a result, or the mark of one too large to keep.
    pub fn kind(&self) -> StoredKind {
        self.kind
    }

    /// The stored bytes.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The stored bytes, owned.
    pub fn into_payload(self) -> Vec<u8> {
        self.payload
    }
}

impl Idempotency {
    /// How long the record of a completed request is kept (24 h by default,
    /// [`DEFAULT_RETENTION`]); duplicates after it run again.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The in-flight lock's lease; without one the watchdog renews it while the request
    /// runs (the default).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The key.
    pub fn key(&self) -> &LockName {
        &self.key
    }

    /// Starts a request with this key and `fingerprint`: replays a completed one, or takes
    /// the in-flight lock without waiting. Two Redis round trips when the key is free (the
    /// record read again once the lock is held: a request that completed in between is
    /// replayed, not run twice), one for a replay.
    ///
    /// # Errors
    /// [`IdempotencyError::InFlight`] when another request holds the key,
    /// [`Mismatch`](IdempotencyError::Mismatch) when it completed with another fingerprint,
    /// [`Redlock`](IdempotencyError::Redlock) on a Redlock client, and the lock's errors.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the key as it was (an acquisition whose answer was not
    /// seen is undone in the background).
    pub async fn begin(&self, fingerprint: &Fingerprint) -> Result<Begin, IdempotencyError> {
        if self.client.engine.nodes.len() > 1 {
            return Err(IdempotencyError::Redlock {
                key: self.key.clone(),
            });
        }
        let record = self.record_key()?;
        if let Some(stored) = self.stored(&record, fingerprint).await? {
            return Ok(Begin::Replay(stored));
        }
        let mut lock = (self.client.lock(self.key.clone()))
            .wait(Duration::ZERO)
            .metrics_label(FAMILY);
        if let Some(lease) = self.lease {
            lock = lock.lease(lease);
        }
        let guard = match lock.await {
            Ok(guard) => guard,
            Err(source) if source.is_wait_timeout() => {
                return Err(IdempotencyError::InFlight {
                    key: self.key.clone(),
                    source,
                })
            }
            Err(error) => return Err(error.into()),
        };
        // Completed between the read and the acquisition: its record is there now.
        if let Some(stored) = self.stored(&record, fingerprint).await? {
            drop(guard);
            return Ok(Begin::Replay(stored));
        }
        Ok(Begin::Run(InFlight {
            guard,
            key: self.key.clone(),
            record,
            fingerprint: *fingerprint,
            retention: self.retention,
        }))
    }

    /// The record's key: `distlock__idem:{<lock key>}`, in the lock's slot.
    fn record_key(&self) -> Result<Vec<u8>, LockError> {
        let keys = self.client.engine.keys(&self.key, LockMode::Exclusive)?;
        Ok([RECORD_PREFIX.as_bytes(), b"{", keys.lock(), b"}"].concat())
    }

    /// The record, checked against `fingerprint`.
    async fn stored(
        &self,
        record: &[u8],
        fingerprint: &Fingerprint,
    ) -> Result<Option<Stored>, IdempotencyError> {
        let engine = &self.client.engine;
        let get = redis::cmd("GET").arg(record).to_owned();
        let value: Option<Vec<u8>> = engine.query(&self.key, &get).await?;
        let Some(value) = value else {
            return Ok(None);
        };
        match record::decode(value) {
            Some((kind, stored, payload)) if stored == *fingerprint => {
                Ok(Some(Stored { kind, payload }))
            }
            Some(_) => Err(IdempotencyError::Mismatch {
                key: self.key.clone(),
            }),
            None => Err(IdempotencyError::Codec {
                key: self.key.clone(),
                action: "decode",
                source: "the stored record is not one this version wrote".into(),
            }),
        }
    }
}

impl fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("key", &self.key)
            .field("retention", &self.retention)
            .field("lease", &self.lease)
            .finish()
    }
}
