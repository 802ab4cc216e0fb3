//! distlock-verify: a seeded, history-checked fault harness for distlock, in the manner of
//! Jepsen. Client processes (this binary's client sub-mode) run every kind of hold against
//! one topology while a nemesis pauses, kills and partitions; every operation's invocation
//! and completion, every `is_held()` answer and `lost()` signal goes to a history; each hold
//! read-modify-writes fenced registers on a private redis-server; the checkers then judge
//! the merged history.
//!
//! ```text
//! cargo run -p distlock-verify --release -- --topology single|cluster|sentinel|redlock \
//!     --secs N --seed S [--faults all|none|a,b,…] [--control unfenced|nolock|dead-grant] \
//!     [--clients 3] [--tasks 4] [--handoff-bound-ms 3000] [--out DIR]
//! ```
//!
//! * [`args`]: the command line; [`controller`]: one run; [`topology`]: the lock servers;
//!   [`clients`]: the client processes; [`workload`], [`hold`]: what a client does, with
//!   [`jobs`], [`election`] and [`idempotency`] beside the locks, and [`http`]: each
//!   process's idempotency layer over HTTP and the gateways that retry requests across them;
//!   [`register`]: the fenced resource; [`guarded`]: the registers beside the locks, written
//!   by guarded writes; [`nemesis`]: the faults (`reshard`: Cluster
//!   resharding; [`waiter_kill`]: kills of waiting clients, found by following their
//!   histories with [`tail`]; [`dead_grant`]: the hand-off checker's control); [`history`]:
//!   the events; [`sentinel_watch`]: what the Sentinels name;
//!   [`check`]: the checkers; [`report`]: what is printed.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod args;
pub mod check;
pub mod clients;
pub mod controller;
pub mod dead_grant;
pub mod election;
pub mod guarded;
pub mod history;
pub mod hold;
pub mod http;
pub mod idempotency;
pub mod jobs;
pub mod nemesis;
pub mod register;
pub mod report;
mod reshard;
pub mod sentinel_watch;
pub mod tail;
pub mod topology;
pub mod waiter_kill;
pub mod workload;
