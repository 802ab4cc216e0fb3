//! Faults injected into real processes: killed and paused holders, Redis restarts, cut and
//! slowed connections, lost replies, cluster failovers and resharding. The 30 s soak is
//! `#[ignore]`d: run it with `cargo test -p distlock-tests --test faults -- --ignored`.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod fault_claims;
mod fault_cluster;
mod fault_dead_waiter;
mod fault_fenced_postgres;
mod fault_guarded_write;
mod fault_holder_crash;
mod fault_holder_pause;
mod fault_lost_reply;
mod fault_redis;
mod fault_redlock;
mod fault_reshard;
mod fault_shutdown;
mod fault_soak;
