//! [`IdempotencyError`]: why an idempotent request did not run or was not recorded.

use crate::error::LockError;
use crate::protocol::name::LockName;

/// Why a request with an idempotency key did not run, or ran without its result being
/// stored. Each variant names the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdempotencyError {
    /// Another request with this key is in flight: retry later (HTTP `409` with
    /// `Retry-After`, gRPC `ABORTED`). `source` is the busy lock's error (its remaining lease
    /// and holder, for logs and for estimating when to retry; never for answers).
    #[error("idempotency key `{key}` is in flight in another request")]
    InFlight {
        /// The key.
        key: LockName,
        /// The lock's answer ([`LockError::WaitTimeout`]).
        #[source]
        source: LockError,
    },
    /// This key completed with another request (another fingerprint): HTTP `422`, gRPC
    /// `FAILED_PRECONDITION`.
    #[error("idempotency key `{key}` was used for another request")]
    Mismatch {
        /// The key.
        key: LockName,
    },
    /// The in-flight hold was lost before the result was stored (its lease ran out, Redis
    /// lost it, or a newer holder took over): nothing was stored, and a retry runs again.
    #[error("idempotency key `{key}`: the in-flight hold was lost; nothing was stored")]
    Lost {
        /// The key.
        key: LockName,
    },
    /// The result could not be encoded, or a stored one decoded (the `serde` feature).
    #[error("idempotency key `{key}`: cannot {action} the result: {source}")]
    Codec {
        /// The key.
        key: LockName,
        /// `encode` or `decode`.
        action: &'static str,
        /// The codec's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Idempotency records are kept on one Redis (a server, Sentinel's master or a
    /// Cluster), not under Redlock: a record on independent masters has no single place to
    /// be stored atomically with the release.
    #[error("idempotency key `{key}`: records are not kept under Redlock")]
    Redlock {
        /// The key.
        key: LockName,
    },
    /// Taking or releasing the in-flight lock, or reading the record, failed: Redis
    /// unavailable, a timeout, an invalid name.
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl IdempotencyError {
    /// The idempotency key, when the error concerns one.
    pub fn key(&self) -> Option<&LockName> {
        match self {
            Self::InFlight { key, .. }
            | Self::Mismatch { key }
            | Self::Lost { key }
            | Self::Codec { key, .. }
            | Self::Redlock { key } => Some(key),
            Self::Lock(error) => error.name(),
        }
    }

    /// The error's class: its variant as a stable `snake_case` word (`in_flight`,
    /// `mismatch`, `lost`, `codec`, `redlock`, or a lock error's
    /// [class](LockError::class)). Unlike the error's text, it never names the key.
    pub fn class(&self) -> &'static str {
        match self {
            Self::InFlight { .. } => "in_flight",
            Self::Mismatch { .. } => "mismatch",
            Self::Lost { .. } => "lost",
            Self::Codec { .. } => "codec",
            Self::Redlock { .. } => "redlock",
            Self::Lock(error) => error.class(),
        }
    }

    /// True for a duplicate of a request still in flight.
    pub fn is_in_flight(&self) -> bool {
        matches!(self, Self::InFlight { .. })
    }

    /// True for a key reused with another request.
    pub fn is_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch { .. })
    }

    /// True when Redis could not be reached or did not answer in time.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Lock(e) if e.is_unavailable())
    }
}
