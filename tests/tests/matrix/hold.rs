//! One face for every kind: a request and a hold, whether of one name or of `lock_all`.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use lock_core::{
    LockClient, LockError, LockGuard, LockMode, LockRequest, MultiLockGuard, MultiLockRequest,
    OnLost,
};

/// A kind of hold, as a caller asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Read,
    Write,
    /// One permit of one: exclusive, so the cells can assert exclusion.
    Semaphore,
    LockAll,
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
            Self::Lock | Self::LockAll => LockMode::Exclusive,
            Self::Read => LockMode::Read,
            Self::Write => LockMode::Write,
            Self::Semaphore => LockMode::Permit,
        }
    }
}

/// A request of one name or of several.
pub(crate) enum Req {
    One(LockRequest),
    All(MultiLockRequest),
}

macro_rules! both {
    ($req:expr, |$r:ident| $body:expr) => {
        match $req {
            Req::One($r) => Req::One($body),
            Req::All($r) => Req::All($body),
        }
    };
}

impl Req {
    pub(crate) fn wait(self, wait: Duration) -> Self {
        both!(self, |r| r.wait(wait))
    }
    pub(crate) fn lease(self, lease: Duration) -> Self {
        both!(self, |r| r.lease(lease))
    }
    pub(crate) fn request_id(self, id: &str) -> Self {
        both!(self, |r| r.request_id(id))
    }
    pub(crate) fn on_lost(self, on_lost: OnLost) -> Self {
        both!(self, |r| r.on_lost(on_lost))
    }
    pub(crate) fn metrics_label(self, label: String) -> Self {
        let label: Cow<'static, str> = label.into();
        both!(self, |r| r.metrics_label(label))
    }

    pub(crate) async fn acquire(self) -> Result<Hold, LockError> {
        match self {
            Req::One(r) => r.acquire().await.map(Hold::One),
            Req::All(r) => r.acquire().await.map(Hold::All),
        }
    }

    pub(crate) async fn try_acquire(self) -> Result<Option<Hold>, LockError> {
        match self {
            Req::One(r) => Ok(r.try_acquire().await?.map(Hold::One)),
            Req::All(r) => Ok(r.try_acquire().await?.map(Hold::All)),
        }
    }

    pub(crate) async fn run<F: Future>(self, fut: F) -> Result<F::Output, LockError> {
        match self {
            Req::One(r) => r.run(fut).await,
            Req::All(r) => r.run(fut).await,
        }
    }
}

/// A hold of one name or of several.
pub(crate) enum Hold {
    One(LockGuard),
    All(MultiLockGuard),
}

impl Hold {
    pub(crate) fn is_held(&self) -> bool {
        match self {
            Hold::One(g) => g.is_held(),
            Hold::All(g) => g.is_held(),
        }
    }

    /// The fencing token of `name`.
    pub(crate) fn token(&self, name: &str) -> u64 {
        match self {
            Hold::One(g) => g.fencing_token(),
            Hold::All(g) => g.fencing_token(name).expect("one of the names"),
        }
    }

    pub(crate) async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        match self {
            Hold::One(g) => g.extend(lease).await,
            Hold::All(g) => g.extend(lease).await,
        }
    }

    /// Resolves once the hold is known lost.
    pub(crate) async fn lost(&self) {
        match self {
            Hold::One(g) => {
                g.lost().await;
            }
            Hold::All(g) => {
                g.lost().await;
            }
        }
    }

    pub(crate) async fn release(self) -> Result<(), LockError> {
        match self {
            Hold::One(g) => g.release().await,
            Hold::All(g) => g.release().await,
        }
    }
}
