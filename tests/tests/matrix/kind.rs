//! The kinds of hold as a caller asks for them, and what each promises.

use lock_core::{LockClient, LockMode};

use crate::hold::{IdemReq, Req};

/// A kind of hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Read,
    Write,
    /// One permit of one: exclusive, so the cells can assert exclusion.
    Semaphore,
    LockAll,
    /// A scheduled job's fire: held while its body runs.
    Job,
    /// A leader election's term.
    Election,
    /// An idempotency key in flight.
    Idempotency,
}

impl Kind {
    /// A request of this kind on `name` (`lock_all`: two names derived from it).
    pub(crate) fn request(self, client: &LockClient, name: &str) -> Req {
        match self {
            Self::Lock => Req::One(client.lock(name)),
            Self::Read => Req::One(client.read_lock(name)),
            Self::Write => Req::One(client.write_lock(name)),
            Self::Semaphore => Req::One(client.semaphore(name, 1)),
            Self::LockAll => Req::All(client.lock_all(self.names(name))),
            Self::Job => Req::Job(client.job(name)),
            Self::Election => Req::Election(client.election(name)),
            Self::Idempotency => Req::Idempotency(IdemReq::new(client, name)),
        }
    }

    /// The lock names a request on `name` holds.
    pub(crate) fn names(self, name: &str) -> Vec<String> {
        match self {
            Self::LockAll => vec![format!("{name}_a"), format!("{name}_b")],
            _ => vec![name.to_owned()],
        }
    }

    /// True when two holds of this kind exclude each other (readers share).
    pub(crate) fn exclusive(self) -> bool {
        self != Self::Read
    }

    /// What `inspect` says is held.
    pub(crate) fn mode(self) -> LockMode {
        match self {
            Self::Read => LockMode::Read,
            Self::Write => LockMode::Write,
            Self::Semaphore => LockMode::Permit,
            _ => LockMode::Exclusive,
        }
    }

    /// True when one attempt that does not wait exists (an election only campaigns).
    pub(crate) fn has_try(self) -> bool {
        self != Self::Election
    }

    /// True when the same request in one scope re-enters the hold; a second campaign in a
    /// scope that leads is refused instead (`InvalidRequest`, documented).
    pub(crate) fn reenters(self) -> bool {
        self != Self::Election
    }

    /// True when `OnLost::Continue` exists (an idempotency key always aborts on loss).
    pub(crate) fn continues_on_lost(self) -> bool {
        self != Self::Idempotency
    }

    /// True when a second run replays the first's stored result instead of running.
    pub(crate) fn replays(self) -> bool {
        self == Self::Idempotency
    }

    /// The metrics label of kinds that choose their own (their names are unbounded: never
    /// a label).
    pub(crate) fn fixed_label(self) -> Option<&'static str> {
        match self {
            Self::Election => Some("election"),
            Self::Idempotency => Some("idempotency"),
            _ => None,
        }
    }

    /// True when the kind needs one Redis: under Redlock it answers a typed refusal.
    pub(crate) fn needs_one_redis(self) -> bool {
        matches!(
            self,
            Self::Read | Self::Write | Self::Semaphore | Self::Election | Self::Idempotency
        )
    }
}
