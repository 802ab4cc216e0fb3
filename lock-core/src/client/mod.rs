//! The client: the handle ([`handle`]), the lock family's requests ([`family`]), its builder
//! with every setting ([`builder`], and the replica setting it takes, [`replica_ack`]) and
//! the process-wide default client ([`default`]).
//!
//! Where `impl LockClient` lives: [`handle`] holds the block for making a client and taking
//! the exclusive lock, [`family`] the block for read-write locks, semaphores and
//! multi-locks, [`health`] the readiness probe and `shutdown` the end of every hold; the
//! operator's tools (inspect, list, force release) are the one other block, in
//! [`crate::ops`], so that this module does not depend on the operations built on it.
//! `LockClientBuilder` has all its impls in its own file. `internal` (feature `__internal`)
//! holds the block the workspace's tests and tools read the client's insides through: not
//! public API.

pub(crate) mod builder;
pub(crate) mod default;
pub(crate) mod family;
pub(crate) mod handle;
pub(crate) mod health;
#[cfg(feature = "__internal")]
mod internal;
pub(crate) mod replica_ack;
pub(crate) mod shutdown;
