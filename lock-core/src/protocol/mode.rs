//! What kind of hold a lock is: exclusive, one side of a read-write lock, or a permit of a
//! semaphore. The mode picks the scripts, the release channel and what a scope may re-enter.

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

    /// The release channel's prefix: Redisson's for the lock and the read-write lock (so that
    /// its waiters wake on distlock's releases), distlock's own for semaphores.
    pub(crate) fn channel_prefix(self) -> &'static str {
        match self {
            Self::Exclusive => "redisson_lock__channel:",
            Self::Read | Self::Write => "redisson_rwlock:",
            Self::Permit => "distlock__semaphore:",
        }
    }

    /// The one-letter code the batch renewal script reads.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::Exclusive => "x",
            Self::Read => "r",
            Self::Write => "w",
            Self::Permit => "s",
        }
    }

    /// True when a scope holding a hold of `self` may hand it to a request for `wanted`
    /// (re-entry): the same mode, or a read covered by the write lock.
    pub(crate) fn covers(self, wanted: Self) -> bool {
        self == wanted || (self == Self::Write && wanted == Self::Read)
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_hold_covers_reads_and_nothing_else_crosses() {
        use LockMode::*;
        assert!(Write.covers(Read));
        assert!(Write.covers(Write));
        assert!(!Read.covers(Write));
        assert!(!Exclusive.covers(Read));
        assert!(!Permit.covers(Exclusive));
        assert!(Permit.covers(Permit));
    }
}
