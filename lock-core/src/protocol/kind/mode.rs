//! What kind of hold a lock is: exclusive, one side of a read-write lock, or a permit of a
//! semaphore (its layout and rules: [`super`]).

use std::fmt;

/// The letter that names a kind of hold in the library's arguments (RENEW's and
/// GUARDED_WRITE's), as a literal: [`LockMode::letter`] reads it, and the library's prelude
/// (`protocol/library.rs`) writes it into Lua as `EXCLUSIVE`, `READ`, `WRITE` and `PERMIT`,
/// so that both sides spell a kind from this one place.
macro_rules! mode_letter {
    (Exclusive) => {
        "x"
    };
    (Read) => {
        "r"
    };
    (Write) => {
        "w"
    };
    (Permit) => {
        "s"
    };
}
pub(crate) use mode_letter;

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

impl LockMode {
    /// The letter that names this kind in the library's arguments (see [`mode_letter`]).
    pub(crate) fn letter(self) -> &'static str {
        match self {
            Self::Exclusive => mode_letter!(Exclusive),
            Self::Read => mode_letter!(Read),
            Self::Write => mode_letter!(Write),
            Self::Permit => mode_letter!(Permit),
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
