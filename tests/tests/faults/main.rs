//! Faults injected into real processes: killed and paused holders, Redis restarts, cut and
//! slowed connections, lost replies, cluster failovers and resharding. The 30 s soak is
//! `#[ignore]`d: run it with `cargo test -p distlock-tests --test faults -- --ignored`.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod claims;
mod cluster;
mod dead_waiter;
mod fenced_postgres;
mod guarded_write;
mod holder_crash;
mod holder_pause;
mod lost_reply;
mod redis_server;
mod redlock;
mod reshard;
mod shutdown;
mod soak;
