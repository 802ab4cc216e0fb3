//! The protocol's Redis Functions library and the table of its functions.
//!
//! The library is plain Lua, loaded as it is: `FUNCTION LOAD` defines its helpers and
//! constants once, and each operation is a function called with `FCALL` (or `FCALL_RO` for
//! those that only read). Its text is joined here at compile time, by `concat!` alone: a
//! prelude written from the Rust side (the library's name, its functions' prefix, the
//! Cluster suffix and the kinds' letters), the Lua files under `library/` — one per kind
//! of hold or concern, shared helpers first — and the registration of every function,
//! written from the table in [`functions!`].
//!
//! Function names are global on a server, so the library's name and every function's name
//! carry its version: two client versions with different libraries use one server side by
//! side (a rolling upgrade). Any change to the text takes a new version, written once, in
//! [`library!`]: the test `the_library_text_is_pinned_to_its_version` fails until it has one.

use crate::protocol::kind::mode::{mode_letter, LockMode};

/// Spells a name of this version's library, as a literal: `library!()` is the library's
/// name, `library!("acquire")` a function's. The one place the version is written: the
/// Lua side takes it from the prelude written here.
macro_rules! library {
    () => {
        "distlock_4"
    };
    ($function:literal) => {
        concat!(library!(), "_", $function)
    };
}

/// What a function's Cluster variant adds to its name, as a literal.
macro_rules! cluster_suffix {
    () => {
        "_cluster"
    };
}

/// The library's functions, one line each, handed to `$generate` (the callback pattern:
/// [`function_enum!`] makes the Rust side's [`Function`] of it, [`lua_registrations!`] the
/// Lua that registers each). A line is:
///
/// `Variant callback: access, failure, cluster;`
///
/// - `callback`: the Lua function (a `local function` of a file under `library/`), also
///   the function's name after the version's prefix;
/// - `access`: `reads` (registered `no-writes`, called with `FCALL_RO`), `frees` (ends or
///   extends holds: `allow-oom`, so a full server can still let its locks go) or `writes`;
/// - `failure`: `fails_fast` or `always_sent` (see [`Function::fails_fast`]);
/// - `cluster`: `guarded` (a Cluster variant behind the migration guard), `own(callback)`
///   (a Cluster variant of its own) or `none`.
macro_rules! functions {
    ($generate:ident) => {
        $generate! {
            Acquire acquire: writes, fails_fast, guarded;
            Release release: frees, always_sent, guarded;
            Touch touch: frees, always_sent, guarded;
            ForceRelease force_release: frees, fails_fast, guarded;
            RwAcquire rw_acquire: writes, fails_fast, guarded;
            RwRelease rw_release: frees, always_sent, guarded;
            RwTouch rw_touch: frees, always_sent, guarded;
            RwForceRelease rw_force_release: frees, fails_fast, guarded;
            SemAcquire sem_acquire: writes, fails_fast, guarded;
            SemRelease sem_release: frees, always_sent, guarded;
            SemTouch sem_touch: frees, always_sent, guarded;
            SemForceRelease sem_force_release: frees, fails_fast, guarded;
            Inspect inspect: reads, fails_fast, guarded;
            Linger linger: frees, always_sent, guarded;
            Proclaim proclaim: writes, fails_fast, guarded;
            Leader leader: reads, fails_fast, guarded;
            /// Idempotency keys' completion: only their feature calls it.
            #[cfg_attr(not(feature = "idempotency"), expect(dead_code))]
            Complete complete: writes, always_sent, guarded;
            GuardedWrite guarded_write: writes, fails_fast, guarded;
            /// Redlock only: never on a Cluster.
            FenceFloor fence_floor: writes, fails_fast, none;
            /// Many locks. No guard: on a slot mid-migration Redis runs it only where all its
            /// keys exist, and then it answers the first lock busy without writing.
            MultiAcquire multi_acquire: writes, fails_fast, none;
            /// Many locks. Its Cluster variant takes the guard only when a renewal touches a
            /// key it does not declare (a reader's timeout key, a permit's records).
            Renew renew: frees, always_sent, own(renew_cluster);
        }
    };
}

/// One cell of the table in [`functions!`], read as Rust or as Lua: each word of a column
/// is listed, so a misspelt one does not compile.
#[rustfmt::skip]
macro_rules! cell {
    (reads_only reads) => { true };
    (reads_only frees) => { false };
    (reads_only writes) => { false };
    (redis_flags reads) => { &["no-writes"] };
    (redis_flags frees) => { &["allow-oom"] };
    (redis_flags writes) => { &[] };
    (lua_flags reads) => { "{'no-writes'}" };
    (lua_flags frees) => { "{'allow-oom'}" };
    (lua_flags writes) => { "{}" };
    (fails_fast fails_fast) => { true };
    (fails_fast always_sent) => { false };
    (has_cluster_variant guarded) => { true };
    (has_cluster_variant own) => { true };
    (has_cluster_variant none) => { false };
    (lua_cluster $callback:ident guarded) => { concat!("guarded(", stringify!($callback), ")") };
    (lua_cluster $callback:ident own $variant:ident) => { stringify!($variant) };
    (lua_cluster $callback:ident none) => { "nil" };
}

/// The Rust side of the table: [`Function`] and what it knows of each.
macro_rules! function_enum {
    ($(
        $(#[$doc:meta])*
        $variant:ident $callback:ident: $access:ident, $failure:ident, $cluster:ident $(($own:ident))?;
    )*) => {
        /// One function of the library (a line of the table in [`functions!`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Function {
            $($(#[$doc])* $variant,)*
        }

        impl Function {
            /// Every function, in the table's order.
            #[cfg(test)]
            pub(crate) const ALL: &[Self] = &[$(Self::$variant),*];

            /// Its registered name (the Cluster variant adds [`CLUSTER_SUFFIX`]).
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => concat!(library!(), "_", stringify!($callback)),)*
                }
            }

            /// True when it only reads (registered `no-writes`): called with `FCALL_RO`, so a
            /// read-only user or a replica can serve it.
            pub(crate) fn reads_only(self) -> bool {
                match self {
                    $(Self::$variant => cell!(reads_only $access),)*
                }
            }

            /// The flags it is registered with, as `FUNCTION LIST` shows them.
            #[cfg(test)]
            pub(crate) fn redis_flags(self) -> &'static [&'static str] {
                match self {
                    $(Self::$variant => cell!(redis_flags $access),)*
                }
            }

            /// True when a client that knows Redis is down refuses it at once
            /// ([`crate::lock::health`]): what starts something — an acquisition, a read, an
            /// operator's tool, a write under a hold. False for what ends or keeps a hold
            /// (releases, which also leave queues; renewals; a job's linger; an idempotent
            /// completion): they always go to Redis, each giving back or keeping what a holder
            /// was promised as soon as Redis answers, and each a probe of whether it is back.
            pub(crate) fn fails_fast(self) -> bool {
                match self {
                    $(Self::$variant => cell!(fails_fast $failure),)*
                }
            }

            /// True when it has a Cluster variant (named with [`CLUSTER_SUFFIX`]) that first
            /// checks that the lock's slot is not being migrated.
            pub(crate) fn has_cluster_variant(self) -> bool {
                match self {
                    $(Self::$variant => cell!(has_cluster_variant $cluster),)*
                }
            }
        }
    };
}

/// The Lua side of the table: the library's last lines, one `register` call a function
/// (`register` in `library/register.lua`).
macro_rules! lua_registrations {
    ($(
        $(#[$doc:meta])*
        $variant:ident $callback:ident: $access:ident, $failure:ident, $cluster:ident $(($own:ident))?;
    )*) => {
        concat!(
            "\n-- Registration, written by lock-core from its table of functions (library.rs).\n",
            $(
                "register('", stringify!($callback), "', ", stringify!($callback), ", ",
                cell!(lua_flags $access), ", ",
                cell!(lua_cluster $callback $cluster $($own)?), ")\n",
            )*
        )
    };
}

functions!(function_enum);

/// What a hold of every kind does through a function of its own kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// Take a hold, or queue for it.
    Acquire,
    /// End a hold (handing on), or leave the queue.
    Release,
    /// Write a hold again, for `WAIT`.
    Touch,
    /// An operator's release of every holder.
    ForceRelease,
}

impl Function {
    /// The function a hold of `kind` runs for `operation`: the table's lines by kind
    /// (readers and writers share the read-write lock's).
    pub(crate) fn of(operation: Operation, kind: LockMode) -> Self {
        use LockMode::{Exclusive, Permit, Read, Write};
        match (operation, kind) {
            (Operation::Acquire, Exclusive) => Self::Acquire,
            (Operation::Acquire, Read | Write) => Self::RwAcquire,
            (Operation::Acquire, Permit) => Self::SemAcquire,
            (Operation::Release, Exclusive) => Self::Release,
            (Operation::Release, Read | Write) => Self::RwRelease,
            (Operation::Release, Permit) => Self::SemRelease,
            (Operation::Touch, Exclusive) => Self::Touch,
            (Operation::Touch, Read | Write) => Self::RwTouch,
            (Operation::Touch, Permit) => Self::SemTouch,
            (Operation::ForceRelease, Exclusive) => Self::ForceRelease,
            (Operation::ForceRelease, Read | Write) => Self::RwForceRelease,
            (Operation::ForceRelease, Permit) => Self::SemForceRelease,
        }
    }
}

/// A line `local NAME = 'value'` of Lua, as a literal.
macro_rules! lua_local {
    ($name:literal, $($value:tt)+) => {
        concat!("local ", $name, " = '", $($value)+, "'\n")
    };
}

/// The library's first lines: its name, and the constants whose one source is the Rust side.
macro_rules! prelude {
    () => {
        concat!(
            concat!("#!lua name=", library!(), "\n"),
            "-- Written by lock-core (protocol/library.rs): the version, the Cluster variants'\n",
            "-- suffix and the kinds' letters (LockMode::letter).\n",
            lua_local!("PREFIX", concat!(library!(), "_")),
            lua_local!("CLUSTER_SUFFIX", cluster_suffix!()),
            lua_local!("EXCLUSIVE", mode_letter!(Exclusive)),
            lua_local!("READ", mode_letter!(Read)),
            lua_local!("WRITE", mode_letter!(Write)),
            lua_local!("PERMIT", mode_letter!(Permit)),
            "\n",
        )
    };
}

/// The library's source, as `FUNCTION LOAD` takes it: the prelude, the files in the order
/// they build on each other (a Lua local is seen only below its definition), then the
/// registrations.
pub(crate) const LIBRARY: &str = concat!(
    prelude!(),
    include_str!("library/common.lua"),
    include_str!("library/queue.lua"),
    include_str!("library/register.lua"),
    include_str!("library/exclusive.lua"),
    include_str!("library/multi.lua"),
    include_str!("library/read_write_holds.lua"),
    include_str!("library/read_write.lua"),
    include_str!("library/semaphore.lua"),
    include_str!("library/inspect.lua"),
    include_str!("library/renew.lua"),
    include_str!("library/fleet.lua"),
    include_str!("library/complete.lua"),
    include_str!("library/guarded_write.lua"),
    functions!(lua_registrations),
);

/// The library's name, which carries its version (`FUNCTION LIST LIBRARYNAME`).
pub(crate) const LIBRARY_NAME: &str = library!();

/// What a function's Cluster variant adds to its name.
pub(crate) const CLUSTER_SUFFIX: &str = cluster_suffix!();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::{
        CLAIM_MS, FENCE_PREFIX, GRANTS_PREFIX, HOLDERS_PREFIX, WAITER_TTL_MS,
    };
    use crate::protocol::messages::GRANT_PREFIX;
    use crate::protocol::replies::ReleaseReply;

    /// The value of the library-level `local NAME = value` (quotes dropped).
    fn constant(name: &str) -> &'static str {
        let start = format!("local {name} = ");
        let line = (LIBRARY.lines())
            .find_map(|line| line.strip_prefix(start.as_str()))
            .unwrap_or_else(|| panic!("the library defines no {name}"));
        line.trim_matches('\'')
    }

    /// The Rust side and the library agree on every constant both use (the others live in
    /// the library only).
    #[test]
    fn the_library_has_the_rust_sides_constants() {
        assert_eq!(constant("PREFIX"), library!(""));
        assert_eq!(constant("CLUSTER_SUFFIX"), CLUSTER_SUFFIX);
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
        for (name, mode) in [
            ("EXCLUSIVE", LockMode::Exclusive),
            ("READ", LockMode::Read),
            ("WRITE", LockMode::Write),
            ("PERMIT", LockMode::Permit),
        ] {
            assert_eq!(constant(name), mode.letter(), "{name}");
        }
        // Keys the library takes from the Rust side only.
        assert!(!LIBRARY.contains(FENCE_PREFIX));
    }

    /// The library's reply codes are [`ReleaseReply`]'s, by name and number:
    /// `local NOT_HELD = 0` for `NotHeld`, and so on.
    #[test]
    fn the_reply_codes_are_the_rust_sides() {
        for reply in ReleaseReply::ALL {
            let camel = format!("{reply:?}");
            let mut screaming = String::new();
            for (i, c) in camel.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    screaming.push('_');
                }
                screaming.push(c.to_ascii_uppercase());
            }
            assert_eq!(
                constant(&screaming),
                reply.code().to_string(),
                "{screaming}"
            );
        }
    }

    /// Each kind runs a function of its own for each operation — the line of the table
    /// whose name says its kind (`rw_`, `sem_`, none for the exclusive lock) — and readers
    /// and writers share the read-write lock's.
    #[test]
    fn each_kind_runs_its_own_function() {
        use Operation::{Acquire, ForceRelease, Release, Touch};
        for operation in [Acquire, Release, Touch, ForceRelease] {
            let of = |kind| Function::of(operation, kind);
            assert_eq!(of(LockMode::Read), of(LockMode::Write));
            let exclusive = of(LockMode::Exclusive)
                .name()
                .strip_prefix(library!(""))
                .unwrap();
            let rw = of(LockMode::Read)
                .name()
                .strip_prefix(library!(""))
                .unwrap();
            let sem = of(LockMode::Permit)
                .name()
                .strip_prefix(library!(""))
                .unwrap();
            assert_eq!(rw, format!("rw_{exclusive}"), "{operation:?}");
            assert_eq!(sem, format!("sem_{exclusive}"), "{operation:?}");
        }
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

    /// `FUNCTION LIST`'s functions of one library: each name with its flags, sorted.
    fn listed(listing: redis::Value) -> Vec<(String, Vec<String>)> {
        use redis::{FromRedisValue, Value};
        // RESP2: a flat list of names and values, for the library and for each function.
        let field = |pairs: &[Value], name: &str| -> Value {
            let at = pairs.chunks(2).find(|pair| {
                String::from_redis_value(pair[0].clone()).is_ok_and(|key| key == name)
            });
            at.map_or(Value::Nil, |pair| pair[1].clone())
        };
        let libraries = Vec::<Vec<Value>>::from_redis_value(listing).expect("a list");
        let [library] = libraries.as_slice() else {
            panic!("one library, not {}", libraries.len())
        };
        let functions = Vec::<Vec<Value>>::from_redis_value(field(library, "functions"));
        let mut out: Vec<(String, Vec<String>)> = (functions.expect("functions").iter())
            .map(|function| {
                let name = String::from_redis_value(field(function, "name")).expect("a name");
                let mut flags =
                    Vec::<String>::from_redis_value(field(function, "flags")).expect("flags");
                flags.sort();
                (name, flags)
            })
            .collect();
        out.sort();
        out
    }

    /// Loaded on a real server, the library registers exactly the table's functions — each
    /// with its flags, and its Cluster variant where it has one — so a line of the table
    /// whose Lua function is missing, or a Lua function the table does not name, shows here.
    #[test]
    fn a_server_lists_exactly_the_tables_functions() {
        let server = lock_testkit::RedisServer::start();
        let loaded: String = server.command(redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY));
        assert_eq!(loaded, LIBRARY_NAME);
        let listing = server.command(
            redis::cmd("FUNCTION")
                .arg("LIST")
                .arg("LIBRARYNAME")
                .arg(LIBRARY_NAME),
        );
        let mut expected: Vec<(String, Vec<String>)> = Vec::new();
        for function in Function::ALL {
            let flags: Vec<String> = function
                .redis_flags()
                .iter()
                .map(|f| f.to_string())
                .collect();
            expected.push((function.name().to_owned(), flags.clone()));
            if function.has_cluster_variant() {
                expected.push((format!("{}{CLUSTER_SUFFIX}", function.name()), flags));
            }
        }
        expected.sort();
        assert_eq!(listed(listing), expected);
    }

    /// The negative control: a registration whose Lua function does not exist (a line of
    /// the table with no function behind it) fails the load, naming it.
    #[test]
    fn a_function_without_its_lua_callback_does_not_load() {
        let server = lock_testkit::RedisServer::start();
        let registration = "register('touch', touch, ";
        assert!(LIBRARY.contains(registration), "written from the table");
        let broken = LIBRARY.replacen(registration, "register('touch', no_such_touch, ", 1);
        let mut conn = server.client().get_connection().expect("a connection");
        let refused = (redis::cmd("FUNCTION").arg("LOAD").arg(&broken))
            .query::<redis::Value>(&mut conn)
            .expect_err("refused");
        assert!(refused.to_string().contains("no_such_touch"), "{refused}");
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
    /// some servers and the newer on others. The pin names the version beside the digest,
    /// both written out: a new digest is pinned with the version it belongs to, in one
    /// diff a reviewer reads (`library!()` here would compare the name with itself).
    #[test]
    fn the_library_text_is_pinned_to_its_version() {
        assert_eq!(
            (LIBRARY_NAME, sha256(LIBRARY).as_str()),
            (PINNED_LIBRARY, PINNED_DIGEST),
            "the library's text changed: raise the version in library! (protocol/library.rs), \
             then pin it with the new digest"
        );
    }

    /// The control: a text changed by one character, or a version raised without a new
    /// pin, fails the check.
    #[test]
    fn a_changed_text_or_version_breaks_the_pin() {
        let pinned = |name: &str, text: &str| {
            (name, sha256(text)) == (PINNED_LIBRARY, PINNED_DIGEST.to_owned())
        };
        assert!(pinned(LIBRARY_NAME, LIBRARY));
        assert!(!pinned(
            LIBRARY_NAME,
            &LIBRARY.replacen("local ", "local  ", 1)
        ));
        assert!(!pinned("distlock_999", LIBRARY));
    }

    /// The hex SHA-256 of `text`.
    fn sha256(text: &str) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The library the digest below was pinned for.
    const PINNED_LIBRARY: &str = "distlock_4";
    /// The SHA-256 of the library's text at version 4.
    const PINNED_DIGEST: &str = "bfb70a1bf3f63851f97caac3aeab94de0d151fa33129a6b73b94d6633a24c5d7";
}
