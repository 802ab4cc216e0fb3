//! The protocol's Redis Functions library (`library.lua`) and the names of its functions.
//!
//! The library is plain Lua, loaded as it is: `FUNCTION LOAD` defines its helpers and
//! constants once, and each operation is a function called with `FCALL` (or `FCALL_RO` for
//! those that only read). Function names are global on a server, so the library's name and
//! every function's name carry its version: two client versions with different libraries
//! use one server side by side (a rolling upgrade). Changing `library.lua` takes a new
//! version: the test `the_library_text_is_pinned_to_its_version` fails until it has one.

/// The library's source, as `FUNCTION LOAD` takes it.
pub(crate) const LIBRARY: &str = include_str!("library.lua");

/// Spells a name of this version's library, as a literal: `library!()` is the library's
/// name, `library!("acquire")` a function's. The one place the version is written on the
/// Rust side (the Lua side has it in its first line and its `PREFIX`).
macro_rules! library {
    () => {
        "distlock_2"
    };
    ($function:literal) => {
        concat!("distlock_2_", $function)
    };
}

/// The library's name, which carries its version (`FUNCTION LIST LIBRARYNAME`).
pub(crate) const LIBRARY_NAME: &str = library!();

/// One function of the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Function {
    Acquire,
    Release,
    Touch,
    ForceRelease,
    RwAcquire,
    RwRelease,
    RwTouch,
    RwForceRelease,
    SemAcquire,
    SemRelease,
    SemTouch,
    SemForceRelease,
    Inspect,
    Linger,
    Proclaim,
    Leader,
    Complete,
    GuardedWrite,
    /// Redlock only: never on a Cluster.
    FenceFloor,
    /// Many locks; safe on a slot mid-migration without the guard.
    MultiAcquire,
    /// Many locks; its Cluster variant checks for a migration itself.
    Renew,
}

impl Function {
    /// Its registered name (the Cluster variant adds [`CLUSTER_SUFFIX`]).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Acquire => library!("acquire"),
            Self::Release => library!("release"),
            Self::Touch => library!("touch"),
            Self::ForceRelease => library!("force_release"),
            Self::RwAcquire => library!("rw_acquire"),
            Self::RwRelease => library!("rw_release"),
            Self::RwTouch => library!("rw_touch"),
            Self::RwForceRelease => library!("rw_force_release"),
            Self::SemAcquire => library!("sem_acquire"),
            Self::SemRelease => library!("sem_release"),
            Self::SemTouch => library!("sem_touch"),
            Self::SemForceRelease => library!("sem_force_release"),
            Self::Inspect => library!("inspect"),
            Self::Linger => library!("linger"),
            Self::Proclaim => library!("proclaim"),
            Self::Leader => library!("leader"),
            Self::Complete => library!("complete"),
            Self::GuardedWrite => library!("guarded_write"),
            Self::FenceFloor => library!("fence_floor"),
            Self::MultiAcquire => library!("multi_acquire"),
            Self::Renew => library!("renew"),
        }
    }

    /// True when it only reads (registered `no-writes`): called with `FCALL_RO`, so a
    /// read-only user or a replica can serve it.
    pub(crate) fn reads_only(self) -> bool {
        matches!(self, Self::Inspect | Self::Leader)
    }

    /// True when a client that knows Redis is down refuses it at once
    /// ([`crate::lock::health`]): what starts something — an acquisition, a read, an
    /// operator's tool, a write under a hold. False for what ends or keeps a hold (releases,
    /// which also leave queues; renewals; a job's linger; an idempotent completion): they
    /// always go to Redis, each giving back or keeping what a holder was promised as soon as
    /// Redis answers, and each a probe of whether it is back.
    pub(crate) fn fails_fast(self) -> bool {
        match self {
            Self::Acquire
            | Self::RwAcquire
            | Self::SemAcquire
            | Self::MultiAcquire
            | Self::FenceFloor
            | Self::ForceRelease
            | Self::RwForceRelease
            | Self::SemForceRelease
            | Self::Inspect
            | Self::Leader
            | Self::Proclaim
            | Self::GuardedWrite => true,
            Self::Release
            | Self::RwRelease
            | Self::SemRelease
            | Self::Touch
            | Self::RwTouch
            | Self::SemTouch
            | Self::Renew
            | Self::Linger
            | Self::Complete => false,
        }
    }

    /// True when it has a Cluster variant (named with [`CLUSTER_SUFFIX`]) that first checks
    /// that the lock's slot is not being migrated.
    pub(crate) fn has_cluster_variant(self) -> bool {
        !matches!(self, Self::FenceFloor | Self::MultiAcquire)
    }

    #[cfg(test)]
    const ALL: [Self; 21] = [
        Self::Acquire,
        Self::Release,
        Self::Touch,
        Self::ForceRelease,
        Self::RwAcquire,
        Self::RwRelease,
        Self::RwTouch,
        Self::RwForceRelease,
        Self::SemAcquire,
        Self::SemRelease,
        Self::SemTouch,
        Self::SemForceRelease,
        Self::Inspect,
        Self::Linger,
        Self::Proclaim,
        Self::Leader,
        Self::Complete,
        Self::GuardedWrite,
        Self::FenceFloor,
        Self::MultiAcquire,
        Self::Renew,
    ];
}

/// What a function's Cluster variant adds to its name.
pub(crate) const CLUSTER_SUFFIX: &str = "_cluster";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::mode::LockMode;
    use crate::protocol::kind::{
        CLAIM_MS, FENCE_PREFIX, GRANTS_PREFIX, HOLDERS_PREFIX, WAITER_TTL_MS,
    };
    use crate::protocol::messages::GRANT_PREFIX;

    /// The value of the library-level `local NAME = value` (quotes dropped).
    fn constant(name: &str) -> &'static str {
        let start = format!("local {name} = ");
        let line = (LIBRARY.lines())
            .find_map(|line| line.strip_prefix(start.as_str()))
            .unwrap_or_else(|| panic!("library.lua defines no {name}"));
        line.trim_matches('\'')
    }

    /// The Rust side and the library agree on every constant both use (the others live in
    /// the library only).
    #[test]
    fn the_library_has_the_rust_sides_constants() {
        assert_eq!(constant("PREFIX"), library!(""));
        assert_eq!(constant("HOLDERS_PREFIX"), HOLDERS_PREFIX);
        assert_eq!(constant("GRANTS_PREFIX"), GRANTS_PREFIX);
        assert_eq!(constant("GRANT_PREFIX"), GRANT_PREFIX);
        assert_eq!(
            constant("LOCK_CHANNEL"),
            LockMode::Exclusive.channel_prefix()
        );
        assert_eq!(constant("RW_CHANNEL"), LockMode::Read.channel_prefix());
        assert_eq!(constant("RW_CHANNEL"), LockMode::Write.channel_prefix());
        assert_eq!(
            constant("SEMAPHORE_CHANNEL"),
            LockMode::Permit.channel_prefix()
        );
        assert_eq!(constant("WAITER_TTL_MIN"), WAITER_TTL_MS.to_string());
        assert_eq!(constant("CLAIM_MS"), CLAIM_MS.to_string());
        // Keys the library takes from the Rust side only.
        assert!(!LIBRARY.contains(FENCE_PREFIX));
    }

    /// Redisson decodes every payload on its channels as a number (`LongCodec`) and acts on
    /// 0 (unlock) and 1 (read unlock): an election's announcement must be another number.
    #[test]
    fn the_leader_message_is_a_number_redisson_ignores() {
        let decoded: i64 = constant("LEADER_MESSAGE")
            .parse()
            .expect("a 64-bit integer, as LongCodec reads");
        assert!(
            decoded != 0 && decoded != 1,
            "0 and 1 mean unlocks to Redisson"
        );
        for message in ["RELEASE_MESSAGE", "WRITE_RELEASE_MESSAGE"] {
            assert!(constant(message).parse::<i64>().is_ok(), "{message}");
        }
    }

    /// Every function the Rust side calls is registered once, with its Cluster variant where
    /// it has one, and nothing else is.
    #[test]
    fn every_function_is_registered_once() {
        let first = LIBRARY.lines().next().unwrap_or_default();
        assert_eq!(first, concat!("#!lua name=", library!()));
        // `register` adds the Cluster variant, `register_one` registers one name.
        let mut registered: Vec<String> = Vec::new();
        for line in LIBRARY.lines() {
            let (call, both) = match line.split_once("('") {
                Some(("register", rest)) => (rest, true),
                Some(("register_one", rest)) => (rest, false),
                _ => continue,
            };
            let name = call.split('\'').next().unwrap_or_default();
            registered.push(name.to_owned());
            if both {
                registered.push(format!("{name}{CLUSTER_SUFFIX}"));
            }
        }
        for function in Function::ALL {
            let base = function.name().strip_prefix(library!("")).unwrap();
            let count = |name: &str| registered.iter().filter(|n| *n == name).count();
            assert_eq!(count(base), 1, "{base}");
            let cluster = format!("{base}{CLUSTER_SUFFIX}");
            let variants = usize::from(function.has_cluster_variant());
            assert_eq!(count(&cluster), variants, "{cluster}");
        }
        let variants = Function::ALL.iter().filter(|f| f.has_cluster_variant());
        assert_eq!(registered.len(), Function::ALL.len() + variants.count());
    }

    /// Functions read their keys and arguments by name in their first lines: nothing below
    /// indexes `keys` or `args` but those lines, the Cluster guard and the loops over many
    /// locks.
    #[test]
    fn functions_read_keys_and_arguments_by_name() {
        let mut continued = false;
        for line in LIBRARY.lines().map(str::trim_start) {
            if line.starts_with("--") {
                continue;
            }
            let indexes = line.contains("keys[") || line.contains("args[");
            // `local a, b = keys[1], keys[2]`, maybe across two lines.
            let named = (line.starts_with("local ") && line.contains(" = ")) || continued;
            continued = line.starts_with("local ") && line.ends_with(" =");
            let allowed = named
                || line.contains("keys[i")
                || line.contains("args[i")
                || line.contains("args[3 * i")
                || line.contains("migrating(keys[1])")
                || line.starts_with("return force_release_shared(");
            assert!(!indexes || allowed, "reads by position: {line}");
        }
    }

    /// Any change to the library's text takes a new version: a server keeps the first
    /// library of a name it was given, so two texts under one name would run the older on
    /// some servers and the newer on others. Update the digest only with a new version.
    #[test]
    fn the_library_text_is_pinned_to_its_version() {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(LIBRARY.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            (LIBRARY_NAME, hex.as_str()),
            (library!(), PINNED_DIGEST),
            "library.lua changed: raise the version in its first line, its PREFIX and \
             library! (protocol/library.rs), then pin the new digest"
        );
    }

    /// The SHA-256 of `library.lua` at version 2.
    const PINNED_DIGEST: &str = "368d5ebd7d8743e5c274f725c808f51f268d04e5de14f847f8b09909f667589c";
}
