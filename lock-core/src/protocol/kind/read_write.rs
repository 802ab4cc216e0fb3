//! The two sides of a read-write lock: Redisson's `RReadWriteLock` (the hash's `mode`,
//! reader fields, `<owner>:write`, each reader hold's timeout key, channel
//! `redisson_rwlock:{<key>}`), with distlock's holder records and its own queue. Both sides
//! share the scripts; the side is an argument, and a writer's owner ends in `:write`.

use std::sync::LazyLock;

use super::mode::LockMode;
use super::{Kind, Layout, Scripts};
use crate::protocol::scripts::LockScript;

const LAYOUT: Layout = Layout {
    channel_prefix: "redisson_rwlock:",
    queue_prefix: "distlock__rwwait:",
    records: None,
};

/// A reader: beside other readers, never beside a writer.
pub(crate) static READ: Kind = Kind {
    mode: LockMode::Read,
    layout: LAYOUT,
    scripts: &SCRIPTS,
    prelude: include_str!("../scripts/rw_prelude.lua"),
    noun: "read lock",
    holders: Some(|n| super::counted(n, "reader")),
    side: "read",
    owner_suffix: "",
    renew_code: "r",
    inspect_name: "read",
    redis_type: "hash",
    redlock: false,
    counted: false,
    covers: &[LockMode::Read],
    refusals: &[(
        LockMode::Write,
        "this scope holds the read lock: upgrading to the write lock would wait for itself; \
         take the write lock first",
    )],
};

/// The writer: alone. Its hold covers reads in the same scope.
pub(crate) static WRITE: Kind = Kind {
    mode: LockMode::Write,
    layout: LAYOUT,
    scripts: &SCRIPTS,
    prelude: include_str!("../scripts/rw_prelude.lua"),
    noun: "write lock",
    holders: Some(|_| "a writer".to_owned()),
    side: "write",
    owner_suffix: ":write",
    renew_code: "w",
    inspect_name: "write",
    redis_type: "hash",
    redlock: false,
    counted: false,
    covers: &[LockMode::Write, LockMode::Read],
    refusals: &[],
};

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let script = |body, args| LockScript::new(body, &READ, args);
    Scripts {
        acquire: script(
            include_str!("../scripts/rw_acquire.lua"),
            &[
                "lease_ms",
                "owner",
                "meta",
                "waiter_ttl_ms",
                "publish",
                "side",
            ],
        ),
        release: script(
            include_str!("../scripts/rw_release.lua"),
            &["owner", "lease_ms", "publish", "meta"],
        ),
        touch: script(
            include_str!("../scripts/rw_touch.lua"),
            &["owner", "lease_ms"],
        ),
        inspect: script(include_str!("../scripts/inspect.lua"), &[]),
        force_release: script(
            include_str!("../scripts/force_release_shared.lua"),
            &["publish"],
        ),
    }
});
