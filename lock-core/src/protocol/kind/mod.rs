//! What differs between the kinds of hold — the exclusive lock, the two sides of a
//! read-write lock and a semaphore's permit — as methods of [`LockMode`], each an
//! exhaustive `match`: a new kind is a new variant, and the compiler lists every Rust place
//! that must handle it — these methods, [`LockMode::letter`] (and the arms of
//! [`mode_letter!`](mode::mode_letter)), and the kinds' lines of the table of functions
//! ([`Function::of`](crate::protocol::library::Function::of)).
//!
//! The compiler does not see the Lua side. A new kind's functions are Lua in a file of its
//! own under `library/` and lines of the table in [`library`](crate::protocol::library);
//! the test `a_server_lists_exactly_the_tables_functions` loads the library on a real server
//! and checks that it registers exactly the table's functions, and
//! `the_library_has_the_rust_sides_constants` that the prelude spells each kind's letter as
//! [`LockMode::letter`] does. What the new kind's Lua does is checked by the tests of
//! `tests/` only.
//!
//! - **Exclusive**: Redisson's `RLock` (a hash `owner → hold count` with the holder record,
//!   `0` on `redisson_lock__channel:{<key>}` at release). The one kind Redlock can take.
//! - **Read, Write**: Redisson's `RReadWriteLock` (the hash's `mode`, reader fields,
//!   `<owner>:write`, each reader hold's timeout key, channel `redisson_rwlock:{<key>}`),
//!   with distlock's holder records and its own queue. A writer's owner ends in `:write`.
//! - **Permit**: a semaphore — a ZSET `owner → expiry` at the key, the holders' records in
//!   the hash `distlock__holders:{<key>}`, its own queue and its own release channel
//!   `distlock__semaphore:{<key>}` (Redisson's semaphores do not share this layout). Each
//!   caller states the capacity; a waiter's queue entry carries it.

pub(crate) mod mode;

use mode::LockMode;

/// Prefix of the grants channels, `distlock__claim:{<key>}:<client id>`: one per lock and
/// waiting client, so that a grant reaches only the process whose waiter it names (one
/// channel per lock would deliver it to every process waiting there). Distlock's own:
/// Redisson decodes every message on its release channels as a number. Named for what it
/// carries since library version 2, a claim the waiter must extend: a client of version 1
/// listens on `distlock__grant:` and would take a claim for its whole lease, so a release of
/// this version never hears it there and skips it (see SAFETY.md, between versions).
pub(crate) const GRANTS_PREFIX: &str = "distlock__claim:";

/// How long a queued waiter stays alive at least (ms, from its arrival): the library
/// queues every waiter for at least this long, whatever it asks, so that a hand-off need
/// not read the deadline of a waiter that queued less than this ago (`alive` in
/// `library/queue.lua`, whose `WAITER_TTL_MIN` this is). The client asks for exactly this.
pub(crate) const WAITER_TTL_MS: u64 = 6_000;

/// How long a hold handed to a waiter by message lives until the waiter's client extends
/// it to its lease (ms; `CLAIM_MS` in `library/common.lua`): how long a waiter that died before it
/// read its grant blocks the name (see [`crate::lock::claim`]).
pub(crate) const CLAIM_MS: u64 = 1_500;

/// Prefix of Redlock's fence floor, the third key of the kinds without records.
pub(crate) const FENCE_PREFIX: &str = "distlock__fence:";

/// A semaphore's holder records: a hash beside its ZSET of holders.
pub(crate) const HOLDERS_PREFIX: &str = "distlock__holders:";

impl LockMode {
    /// The release channel's prefix: Redisson's for the lock and the read-write lock (so that
    /// its waiters wake on distlock's releases), distlock's own for semaphores.
    pub(crate) fn channel_prefix(self) -> &'static str {
        match self {
            Self::Exclusive => "redisson_lock__channel:",
            Self::Read | Self::Write => "redisson_rwlock:",
            Self::Permit => "distlock__semaphore:",
        }
    }

    /// The fair queue of waiters: each by arrival and by liveness deadline, in one ZSET.
    /// Each kind has its own, so that a waiter of one kind is never handed a hold of another
    /// on the same name.
    pub(crate) fn queue_prefix(self) -> &'static str {
        match self {
            Self::Exclusive => "distlock__wait:",
            Self::Read | Self::Write => "distlock__rwwait:",
            Self::Permit => "distlock__semwait:",
        }
    }

    /// The companions' prefixes in key order: the queue, then a semaphore's records or (when
    /// `fenced`, under Redlock) the fence floor. Each goes before `{<lock key>}`, so that all
    /// of them share the lock's Cluster slot.
    pub(crate) fn companions(self, fenced: bool) -> impl Iterator<Item = &'static str> + Clone {
        let third = match self {
            Self::Permit => Some(HOLDERS_PREFIX),
            Self::Exclusive | Self::Read | Self::Write => fenced.then_some(FENCE_PREFIX),
        };
        std::iter::once(self.queue_prefix()).chain(third)
    }

    /// The side a read-write lock's ACQUIRE is told it takes (`read`, `write`); `None` for
    /// the kinds of one side.
    pub(crate) fn side(self) -> Option<&'static str> {
        match self {
            Self::Read | Self::Write => Some(self.as_str()),
            Self::Exclusive | Self::Permit => None,
        }
    }

    /// The Redis type of its key (`TYPE`).
    pub(crate) fn redis_type(self) -> &'static str {
        match self {
            Self::Exclusive | Self::Read | Self::Write => "hash",
            Self::Permit => "zset",
        }
    }

    /// The kind INSPECT reports by the hash's `mode` field ('read', 'write') or 'permit';
    /// `None` for '' (a plain lock, or no lock).
    pub(crate) fn from_inspected(mode: &str) -> Option<Self> {
        match mode {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "permit" => Some(Self::Permit),
            _ => None,
        }
    }

    /// What a hold of this kind is called in messages ("a semaphore needs …").
    fn noun(self) -> &'static str {
        match self {
            Self::Exclusive => "lock",
            Self::Read => "read lock",
            Self::Write => "write lock",
            Self::Permit => "semaphore",
        }
    }

    /// The suffix of its owners' ids (Redisson's `:write` for a writer).
    pub(crate) fn owner_suffix(self) -> &'static str {
        match self {
            Self::Write => ":write",
            Self::Exclusive | Self::Read | Self::Permit => "",
        }
    }

    /// True when a scope holding this kind may hand it to a request for `wanted`: a write
    /// hold covers reads in the same scope; nothing else crosses.
    pub(crate) fn covers(self, wanted: Self) -> bool {
        match self {
            Self::Write => matches!(wanted, Self::Write | Self::Read),
            Self::Exclusive | Self::Read | Self::Permit => wanted == self,
        }
    }

    /// Why a scope holding this kind cannot hand it to a request for `wanted`.
    pub(crate) fn refusal(self, wanted: Self) -> String {
        match (self, wanted) {
            (Self::Read, Self::Write) => "this scope holds the read lock: upgrading to the \
                write lock would wait for itself; take the write lock first"
                .to_owned(),
            _ => format!("this scope holds the name as a {self} hold, not {wanted}"),
        }
    }

    /// Why a request of this kind with `permits` on `nodes` nodes cannot be served, if so:
    /// a semaphore needs a permit, and only exclusive holds are voted on node by node
    /// (Redlock).
    pub(crate) fn unsupported(self, permits: u32, nodes: usize) -> Option<String> {
        let redlock = match self {
            Self::Exclusive => true,
            Self::Read | Self::Write | Self::Permit => false,
        };
        if self == Self::Permit && permits == 0 {
            Some(format!("a {} needs at least 1 permit", self.noun()))
        } else if !redlock && nodes > 1 {
            Some(format!(
                "{self} holds need one Redis (a server, Sentinel or a Cluster); \
                 Redlock supports exclusive locks and lock_all only"
            ))
        } else {
            None
        }
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
        assert!(Read.refusal(Write).contains("upgrading"));
        assert!(Exclusive.refusal(Read).contains("exclusive hold, not read"));
    }

    #[test]
    fn every_shared_mode_is_read_back_from_inspect() {
        for mode in [LockMode::Read, LockMode::Write, LockMode::Permit] {
            assert_eq!(LockMode::from_inspected(mode.as_str()), Some(mode));
        }
        assert_eq!(LockMode::from_inspected(""), None);
    }

    #[test]
    fn only_redlock_kinds_pass_on_many_nodes() {
        assert_eq!(LockMode::Exclusive.unsupported(1, 3), None);
        let read = LockMode::Read.unsupported(1, 3).unwrap();
        assert!(read.contains("Redlock"));
        let permit = LockMode::Permit.unsupported(0, 1).unwrap();
        assert!(permit.contains("at least 1 permit"));
    }
}
