//! The kinds of hold, one type each: everything that differs between the exclusive lock,
//! the two sides of a read-write lock and a semaphore's permit lives in one [`Kind`]
//! descriptor per kind, in the kind's own file — its scripts (acquire, release, touch,
//! inspect, force-release), its key and channel [`Layout`], the arguments only it sends,
//! its renewal code, and what it supports (Redlock, re-entry). The engine asks the
//! descriptor and never switches on the kind: a new kind is a new file with its scripts,
//! and a descriptor that leaves a field out does not compile.
//!
//! [`LockMode`] is the public name of a kind; [`LockMode::kind`] is the one place that maps
//! it to its descriptor (an exhaustive `match`: a new mode without a kind does not compile).

mod exclusive;
pub(crate) mod mode;
mod read_write;
mod semaphore;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

pub(crate) use exclusive::{fence_floor, EXCLUSIVE};
use mode::LockMode;
pub(crate) use read_write::{READ, WRITE};
pub(crate) use semaphore::{HOLDERS_PREFIX, SEMAPHORE};

use crate::protocol::scripts::LockScript;

/// Every kind, for the lookups by what Redis says a key is.
const ALL: [&Kind; 4] = [&EXCLUSIVE, &READ, &WRITE, &SEMAPHORE];

/// One kind of hold: what the engine needs to know about it, and nothing it must guess.
pub(crate) struct Kind {
    /// Its public name.
    pub(crate) mode: LockMode,
    /// Its keys and channel.
    pub(crate) layout: Layout,
    /// Its scripts (assembled on first use).
    pub(crate) scripts: &'static LazyLock<Scripts>,
    /// What its scripts add to the shared prelude.
    pub(crate) prelude: &'static str,
    /// What a hold of this kind is called in messages ("a semaphore needs …").
    pub(crate) noun: &'static str,
    /// Its holders in words, for `n` of them (`3 readers`); `None` for a plain lock.
    pub(crate) holders: Option<fn(usize) -> String>,
    /// What its acquire script takes as `side` ('' when it takes none).
    pub(crate) side: &'static str,
    /// The suffix of its owners' ids (Redisson's `:write` for a writer).
    pub(crate) owner_suffix: &'static str,
    /// The code `renew.lua` picks this kind's renewal by.
    pub(crate) renew_code: &'static str,
    /// What INSPECT answers as the kind of a key held this way ('' for a plain lock).
    pub(crate) inspect_name: &'static str,
    /// The Redis type of its key (`TYPE`).
    pub(crate) redis_type: &'static str,
    /// True when it can be taken under Redlock (voted on node by node).
    pub(crate) redlock: bool,
    /// True when a request sets a capacity (a semaphore's permits), which must be positive.
    pub(crate) counted: bool,
    /// The kinds a scope holding this one may hand out on re-entry.
    pub(crate) covers: &'static [LockMode],
    /// Why a scope holding this kind refuses a request for another, when it is not the
    /// general "holds the name as another kind".
    pub(crate) refusals: &'static [(LockMode, &'static str)],
}

/// `n` and `noun`, plural unless `n` is 1.
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// A kind's scripts of one lock.
pub(crate) struct Scripts {
    pub(crate) acquire: LockScript,
    pub(crate) release: LockScript,
    /// Writes the hold again so that `WAIT` counts it (`min_replicas`).
    pub(crate) touch: LockScript,
    pub(crate) inspect: LockScript,
    pub(crate) force_release: LockScript,
}

/// Where a kind keeps its state: its channel and companion keys, each a prefix before
/// `{<lock key>}`, so that all of them share the lock's Cluster slot.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The release channel's prefix: Redisson's for the lock and the read-write lock (so that
    /// its waiters wake on distlock's releases), distlock's own for semaphores.
    pub(crate) channel_prefix: &'static str,
    /// The fair queue of waiters: each by arrival and by liveness deadline, in one ZSET
    /// (see `prelude.lua`). Each kind has its own, so that a waiter of one kind is never
    /// handed a hold of another on the same name.
    pub(crate) queue_prefix: &'static str,
    /// A third key of the kind's own (a semaphore's holder records), with its Lua name;
    /// else the third key is Redlock's fence floor.
    pub(crate) records: Option<(&'static str, &'static str)>,
}

/// Prefix of the grants channels, `distlock__grant:{<key>}:<client id>`: one per lock and
/// waiting client, so that a grant reaches only the process whose waiter it names (one
/// channel per lock would deliver it to every process waiting there). Distlock's own:
/// Redisson decodes every message on its release channels as a number.
pub(crate) const GRANTS_PREFIX: &str = "distlock__grant:";

/// Where a queue's deadline entries start: a waiter's deadline (ms, Redis clock) is kept as
/// `LIVE_BASE − deadline`, above every arrival (µs, Redis clock: below 4.5·10¹⁵ until 2112)
/// and exact in a double, so that one `ZADD LT` keeps a waiter's place and extends its
/// deadline (see `prelude.lua`).
pub(crate) const LIVE_BASE: u64 = 9_000_000_000_000_000;

/// How long a queued waiter stays alive at least (ms, from its arrival): the scripts queue
/// every waiter for at least this long, whatever it asks, so that a hand-off need not read
/// the deadline of a waiter that queued less than this ago (see `prelude.lua`'s `alive`).
/// The client asks for exactly this.
pub(crate) const WAITER_TTL_MS: u64 = 6_000;

/// Prefix of Redlock's fence floor, the third key of the kinds without records.
pub(crate) const FENCE_PREFIX: &str = "distlock__fence:";

impl Layout {
    /// The Lua names of the keys, in the one order the kind's scripts take them.
    pub(crate) fn key_names(&self) -> [&'static str; 3] {
        let third = self.records.map_or("fence", |(name, _)| name);
        ["key", "queue", third]
    }

    /// The Lua name of the third key the kind does not take (nil in its scripts).
    pub(crate) fn absent_key(&self) -> &'static str {
        self.records.map_or("holders", |_| "fence")
    }

    /// The companions' prefixes in key order: the queue, then the records or (when
    /// `fenced`, under Redlock) the fence floor.
    pub(crate) fn companions(&self, fenced: bool) -> impl Iterator<Item = &'static str> + Clone {
        let third = match self.records {
            Some((_, prefix)) => Some(prefix),
            None => fenced.then_some(FENCE_PREFIX),
        };
        std::iter::once(self.queue_prefix).chain(third)
    }
}

impl Kind {
    /// Its scripts, assembled on first use.
    pub(crate) fn scripts(&'static self) -> &'static Scripts {
        self.scripts
    }

    /// The kind INSPECT names `name` ('' with a holder: a plain lock).
    pub(crate) fn by_inspect_name(name: &str) -> Option<&'static Self> {
        ALL.into_iter().find(|kind| kind.inspect_name == name)
    }

    /// True when a scope holding this kind may hand it to a request for `wanted`.
    pub(crate) fn covers(&self, wanted: &Kind) -> bool {
        self.covers.contains(&wanted.mode)
    }

    /// Why a scope holding this kind cannot hand it to a request for `wanted`.
    pub(crate) fn refusal(&self, wanted: &Kind) -> String {
        match self.refusals.iter().find(|(mode, _)| *mode == wanted.mode) {
            Some((_, reason)) => (*reason).to_owned(),
            None => format!(
                "this scope holds the name as a {} hold, not {}",
                self.mode, wanted.mode
            ),
        }
    }

    /// Why a request of this kind with `permits` on `nodes` nodes cannot be served, if so.
    pub(crate) fn unsupported(&self, permits: u32, nodes: usize) -> Option<String> {
        if self.counted && permits == 0 {
            Some(format!("a {} needs at least 1 permit", self.noun))
        } else if !self.redlock && nodes > 1 {
            Some(format!(
                "{} holds need one Redis (a server, Sentinel or a Cluster); \
                 Redlock supports exclusive locks and lock_all only",
                self.mode
            ))
        } else {
            None
        }
    }
}

impl LockMode {
    /// This kind's descriptor: the one switch on the mode.
    pub(crate) fn kind(self) -> &'static Kind {
        match self {
            Self::Exclusive => &EXCLUSIVE,
            Self::Read => &READ,
            Self::Write => &WRITE,
            Self::Permit => &SEMAPHORE,
        }
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kind({})", self.mode)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode
    }
}

impl Eq for Kind {}

impl Hash for Kind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.mode.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_hold_covers_reads_and_nothing_else_crosses() {
        assert!(WRITE.covers(&READ));
        assert!(WRITE.covers(&WRITE));
        assert!(!READ.covers(&WRITE));
        assert!(!EXCLUSIVE.covers(&READ));
        assert!(!SEMAPHORE.covers(&EXCLUSIVE));
        assert!(SEMAPHORE.covers(&SEMAPHORE));
        assert!(READ.refusal(&WRITE).contains("upgrading"));
        assert!(EXCLUSIVE
            .refusal(&READ)
            .contains("exclusive hold, not read"));
    }

    #[test]
    fn every_mode_has_its_kind_and_back() {
        for kind in ALL {
            assert_eq!(kind.mode.kind(), kind);
            assert_eq!(Kind::by_inspect_name(kind.inspect_name), Some(kind));
        }
    }

    #[test]
    fn only_redlock_kinds_pass_on_many_nodes() {
        assert_eq!(EXCLUSIVE.unsupported(1, 3), None);
        assert!(READ.unsupported(1, 3).unwrap().contains("Redlock"));
        assert!(SEMAPHORE
            .unsupported(0, 1)
            .unwrap()
            .contains("at least 1 permit"));
    }
}
