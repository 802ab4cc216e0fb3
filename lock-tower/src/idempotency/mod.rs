//! The idempotency-key layer: [`IdempotencyLayer`](crate::IdempotencyLayer), built on
//! lock-core's idempotency protocol ([`lock_core::Idempotency`]). See the
//! [crate docs](crate#idempotency-keys).
//!
//! `config` and `key` decide what a request is (skipped, refused, or its key's lock name);
//! `steps` holds the two Redis steps around the inner service (begin, store-or-release),
//! `future` the state machine that runs them, `body` the bodies and `record` the layout of
//! a stored response.

pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod config;
pub(crate) mod future;
pub(crate) mod key;
pub(crate) mod layer;
pub(crate) mod record;
pub(crate) mod service;
pub(crate) mod steps;
