//! What kind of hold a lock is: exclusive, one side of a read-write lock, or a permit of a
//! semaphore (its layout and rules: [`super`]).

use std::fmt;

/// The kind of a hold (see [`LockGuard::mode`](crate::LockGuard::mode)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockMode {
    /// One holder at a time ([`LockClient::lock`](crate::LockClient::lock)): Redisson's `RLock`.
    Exclusive,
    /// A reader of a read-write lock: beside other readers, never beside a writer
    /// ([`LockClient::read_lock`](crate::LockClient::read_lock)).
    Read,
    /// The writer of a read-write lock: alone
    /// ([`LockClient::write_lock`](crate::LockClient::write_lock)).
    Write,
    /// One permit of a semaphore ([`LockClient::semaphore`](crate::LockClient::semaphore)).
    Permit,
}

impl LockMode {
    /// The lower-case name used in logs, metrics and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Read => "read",
            Self::Write => "write",
            Self::Permit => "permit",
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
