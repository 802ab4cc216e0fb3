//! Shared code of the distlock examples: finding or starting a Redis, and the oversell
//! demo (three inventory instances behind one address, with and without a distributed lock).
#![deny(missing_docs)]

pub mod oversell;
mod redis;

pub use crate::redis::ExampleRedis;
