//! Shared code of the distlock examples: finding or starting a Redis (and saying plainly
//! when there is none: [`check_reachable`]), a Postgres row fenced with the lock's token
//! ([`fenced_postgres`]), the oversell demo
//! (three inventory instances behind one address, with and without a distributed lock), and
//! Redisson's own lock scripts (the benchmark's reference, the tests' Redisson client).
#![deny(missing_docs)]

pub mod fenced_postgres;
pub mod oversell;
pub mod payments;
mod redis;
pub mod redisson_scripts;

pub use crate::redis::{check_reachable, redacted, ExampleRedis, NoRedis};
