//! A semaphore's permit: a ZSET `owner → expiry` at the key, the holders' records in the
//! hash `distlock__holders:{<key>}`, its own queue and its own channel
//! `distlock__semaphore:{<key>}` for releases (Redisson's semaphores do not share this
//! layout); grants go to the waiter's client, as every kind's do. Each caller states the
//! capacity; a waiter's queue entry carries it.

use std::sync::LazyLock;

use super::mode::LockMode;
use super::{Kind, Layout, Scripts};
use crate::protocol::scripts::LockScript;

/// A semaphore's holder records: a hash beside its ZSET of holders.
pub(crate) const HOLDERS_PREFIX: &str = "distlock__holders:";

/// One permit of a semaphore.
pub(crate) static SEMAPHORE: Kind = Kind {
    mode: LockMode::Permit,
    layout: Layout {
        channel_prefix: "distlock__semaphore:",
        queue_prefix: "distlock__semwait:",
        records: Some(("holders", HOLDERS_PREFIX)),
    },
    scripts: &SCRIPTS,
    prelude: include_str!("../scripts/sem_prelude.lua"),
    noun: "semaphore",
    holders: Some(|n| super::counted(n, "permit")),
    side: "",
    owner_suffix: "",
    renew_code: "s",
    inspect_name: "permit",
    redis_type: "zset",
    redlock: false,
    counted: true,
    covers: &[LockMode::Permit],
    refusals: &[],
};

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let script = |body, args| LockScript::new(body, &SEMAPHORE, args);
    Scripts {
        acquire: script(
            include_str!("../scripts/sem_acquire.lua"),
            &[
                "lease_ms",
                "owner",
                "meta",
                "waiter_ttl_ms",
                "publish",
                "capacity",
            ],
        ),
        release: script(
            include_str!("../scripts/sem_release.lua"),
            &["owner", "lease_ms", "publish", "capacity", "meta"],
        ),
        touch: script(include_str!("../scripts/sem_touch.lua"), &["owner"]),
        inspect: script(include_str!("../scripts/inspect.lua"), &[]),
        force_release: script(
            include_str!("../scripts/force_release_shared.lua"),
            &["publish"],
        ),
    }
});
