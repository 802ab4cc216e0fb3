//! What a cell met instead of working, and which of those answers the docs list.

use std::fmt;

use lock_core::idempotency::IdempotencyError;
use lock_core::LockError;
use lock_tower::BuildError;

use crate::kind::Kind;
use crate::Opt;

/// A cell's error: the library's own, or a layer's answer.
#[derive(Debug)]
pub(crate) enum Refusal {
    Lock(LockError),
    Idempotency(IdempotencyError),
    /// A layer answered the first request itself, with this HTTP status.
    Status(u16),
    /// A layer refused to be built for the cell's client.
    Build(BuildError),
}

impl From<LockError> for Refusal {
    fn from(error: LockError) -> Self {
        Self::Lock(error)
    }
}

impl From<IdempotencyError> for Refusal {
    fn from(error: IdempotencyError) -> Self {
        match error {
            IdempotencyError::Lock(error) => Self::Lock(error),
            other => Self::Idempotency(other),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock(e) => write!(f, "{e}"),
            Self::Idempotency(e) => write!(f, "{e}"),
            Self::Status(status) => write!(f, "the layer answered {status}"),
            Self::Build(e) => write!(f, "the layer was not built: {e}"),
        }
    }
}

impl Refusal {
    /// True when the hold was lost while the work ran.
    pub(crate) fn is_lost(&self) -> bool {
        match self {
            Self::Lock(e) => e.is_lost(),
            Self::Idempotency(e) => matches!(e, IdempotencyError::Lost { .. }),
            Self::Status(_) | Self::Build(_) => false,
        }
    }
}

/// True when `refusal` is the typed answer the docs list for this combination: what needs
/// one Redis is refused under Redlock (SAFETY.md's table: read-write locks and semaphores
/// `InvalidRequest`; `Election`'s docs: `InvalidRequest`; `Idempotency::begin`:
/// `IdempotencyError::Redlock`), a lock or semaphore layer for such a kind is not built
/// (`BuildError::Unsupported`), the idempotency layer answers that refusal `500` (its
/// table in lock-tower's docs), required replica acknowledgements do not apply to Redlock
/// (`InvalidConfig`), and a guarded write is refused under a read hold and under Redlock
/// (`LockGuard::write`'s docs: `InvalidRequest`).
pub(crate) fn documented(topology: &str, kind: Kind, opt: Opt, refusal: &Refusal) -> bool {
    let refused = topology == "redlock" && kind.needs_one_redis();
    match refusal {
        Refusal::Lock(LockError::InvalidConfig { .. }) => {
            topology == "redlock" && opt == Opt::RequireReplicas
        }
        Refusal::Lock(LockError::InvalidRequest { .. }) => {
            let unwritable = topology == "redlock" || kind == Kind::Read;
            (refused && kind != Kind::Idempotency) || (opt == Opt::GuardedWrite && unwritable)
        }
        Refusal::Idempotency(IdempotencyError::Redlock { .. }) => {
            refused && kind == Kind::Idempotency
        }
        Refusal::Build(BuildError::Unsupported { .. }) => {
            refused && opt == Opt::Layer && kind != Kind::Idempotency
        }
        Refusal::Status(500) => refused && opt == Opt::Layer && kind == Kind::Idempotency,
        _ => false,
    }
}
