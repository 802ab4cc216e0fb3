//! Getting commands and messages to Redis: the connections of each topology ([`connect`],
//! [`backend`], [`sentinel`], with the one-at-a-time setup work they share,
//! [`single_flight`]), the waiters' registry of release channels ([`waiters`]),
//! the pub/sub connection that serves it ([`pubsub`]) and what the client knows of its
//! masters' replicas ([`replicas`]). Nothing here knows what a lock is
//! beyond the channel names it is given.

pub(crate) mod backend;
pub(crate) mod connect;
pub(crate) mod pubsub;
pub(crate) mod replicas;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;
pub(crate) mod single_flight;
pub(crate) mod waiters;
