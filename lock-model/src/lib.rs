//! An in-memory Redis that runs distlock's shipped Functions library, unchanged, in an
//! embedded Lua 5.1: the servers of a model checker of the protocol (issue "Every
//! interleaving").
//!
//! # What is modelled
//!
//! - **A node** ([`Node`]): a keyspace of strings, hashes and sorted sets with key expiry
//!   on the node's virtual clock (ms), pub/sub subscribers per channel and shard channel,
//!   and its Functions libraries. It is plain data (`Clone + Eq + Hash`): a model state
//!   hashes, and a replica is a copy. Expiry is lazy as in Redis (an expired key is absent
//!   to every command; [`Node::expire`] drops them so that equal states hash equally).
//! - **The commands the library uses, exactly** ([`Command`]): those of
//!   lock-core/src/protocol/library/*.lua, of Redisson's lock, unlock and renew scripts
//!   (exclusive and read-write), and of the guarded-write workload (SET, INCR, GET, DEL),
//!   with the options they use and the error replies they can meet. Anything else — an
//!   unknown command, an option left out, a Redis Lua API the model does not offer — fails
//!   the run with a [`ModelError`], never answers. A test ties the command list to the
//!   library's text both ways.
//! - **Redis 7's script rules** (src/script_lua.c, src/function_lua.c, src/eval.c,
//!   src/functions.c): `FUNCTION LOAD` with its shebang, a load-time global table holding
//!   only `redis.register_function` (both its forms, with flags); `FCALL`/`FCALL_RO`
//!   calling `callback(keys, args)`; `EVAL` with `KEYS` and `ARGV`; argument and reply
//!   conversions as Redis makes them; `redis.call` raising and `redis.pcall` returning
//!   error tables; `redis.error_reply`/`status_reply`; Redis' `pcall`; read-only globals
//!   (writing one, or reading one that does not exist, raises Redis' errors); no rollback
//!   after an error; the read-only rule of `no-writes` functions; Redis' error texts with
//!   the script's name and line.
//! - **`TIME`** answers the node's clock in µs: successive `TIME`s within one millisecond
//!   strictly increase (fencing tokens rely on real time moving on between grants), and a
//!   clock stepped back repeats itself as a real one would (see `clock.rs`).
//! - **Library-level locals are node state.** Each node keeps one library state for its
//!   life; in the model its Lua half lives in a [`Runtime`] (one per worker thread: a Lua
//!   state is not `Send`) and its values in the [`Node`]: every scalar upvalue reachable
//!   from the registered callbacks (today `on_cluster`, and the constants) is set from the
//!   node before a call and read back after it. A call that changes any other reachable
//!   value (a table's contents, a function) fails the run.
//! - **Replication** by effects, as Redis replicates scripts: a call's [`Effects`] (the
//!   final value of each key it wrote, and its publications) apply to a replica as a unit,
//!   so a replica that missed the last k calls is a copy with k effects pending.
//! - **Coverage**: a line hook records which lines of a library ran; [`Coverage::report`]
//!   lists every code line never reached, with its text and function. Code lines come from
//!   the compiled chunk, so nested functions count whether or not they ran.
//!
//! # What is not, and why
//!
//! - Number formatting follows current servers (Redis ≥ 7.2.5, Valkey): Redis 7.0 printed
//!   non-integral scores and Lua numbers with `%.17g`. They agree on every number the
//!   library uses (integers below 10^15).
//! - Hash field order is insertion order (a listpack's). A real hash with a value over 64
//!   bytes or over 128 fields lists its fields in hash-table order, which no model can
//!   know: the model checks one of the orders a server may show.
//! - Cluster slots, `MOVED`/`ASK`/`TRYAGAIN`, ACLs, OOM, `min-replicas`, pattern
//!   subscriptions, RESP3, script timeouts and `SCRIPT KILL` are not modelled; neither is
//!   `WAIT` (the explorer decides what a replica acknowledged).
//! - Lua's own library is Lua 5.1.5's, as Redis embeds it, without Redis' `cjson`, `bit`,
//!   `cmsgpack`, `struct` or `os`, nor its deterministic `math.random` (using them fails
//!   the run).

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod bytecode;
mod call;
mod clock;
mod commands;
mod coverage;
mod error;
mod hash;
mod keyspace;
mod library;
mod node;
mod numbers;
mod pubsub;
mod reply;
mod runtime;
mod shim;
mod zset;

pub use commands::Command;
pub use coverage::{Coverage, CoverageReport, MissedLine};
pub use error::ModelError;
pub use hash::Hash;
pub use keyspace::{Entry, Keyspace, Stored};
pub use library::{FunctionInfo, Library, LocalInfo};
pub use node::{CallOutcome, Effects, Node};
pub use pubsub::{ClientId, Message, Publication};
pub use reply::Reply;
pub use runtime::{LoadError, Runtime};
pub use zset::{Score, ZSet};

/// The library lock-core ships, byte for byte the text its clients `FUNCTION LOAD` and
/// `FCALL`: what the model checks. (lock-core is a dependency for this constant only.)
pub const SHIPPED_LIBRARY: &str = lock_core::ops::FUNCTIONS_SOURCE;
