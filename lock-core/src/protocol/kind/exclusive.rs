//! The exclusive lock: one holder at a time, Redisson's `RLock` (a hash `owner → hold
//! count` with the holder record, `0` on `redisson_lock__channel:{<key>}` at release).
//! The one kind Redlock can take: its scripts also take the fence floor there.

use std::sync::LazyLock;

use super::mode::LockMode;
use super::{Kind, Layout, Scripts};
use crate::protocol::scripts::LockScript;

/// The exclusive lock.
pub(crate) static EXCLUSIVE: Kind = Kind {
    mode: LockMode::Exclusive,
    layout: Layout {
        channel_prefix: "redisson_lock__channel:",
        queue_prefix: "distlock__wait:",
        records: None,
    },
    scripts: &SCRIPTS,
    prelude: "",
    noun: "lock",
    holders: None,
    side: "",
    owner_suffix: "",
    renew_code: "x",
    inspect_name: "",
    redis_type: "hash",
    redlock: true,
    counted: false,
    covers: &[LockMode::Exclusive],
    refusals: &[],
};

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let script = |body, args| LockScript::new(body, &EXCLUSIVE, args);
    Scripts {
        acquire: script(
            include_str!("../scripts/acquire.lua"),
            &["lease_ms", "owner", "meta", "waiter_ttl_ms", "publish"],
        ),
        release: script(
            include_str!("../scripts/release.lua"),
            &["owner", "lease_ms", "publish", "meta"],
        ),
        touch: script(include_str!("../scripts/touch.lua"), &["owner", "lease_ms"]),
        inspect: script(include_str!("../scripts/inspect.lua"), &[]),
        force_release: script(include_str!("../scripts/force_release.lua"), &["publish"]),
    }
});

static FENCE_FLOOR: LazyLock<LockScript> = LazyLock::new(|| {
    LockScript::new(
        include_str!("../scripts/fence_floor.lua"),
        &EXCLUSIVE,
        &["token", "lease_ms"],
    )
});

/// Redlock's fence floor script (the exclusive lock's: the only kind Redlock takes).
pub(crate) fn fence_floor() -> &'static LockScript {
    &FENCE_FLOOR
}
