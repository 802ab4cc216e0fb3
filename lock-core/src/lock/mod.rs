//! A lock's lifecycle: the request ([`request`]) and the options every request shares
//! ([`options`]), the acquisition
//! ([`acquire`], with its clean-up guard [`pending`] and the Redlock tallies of
//! [`quorum`]), the hold shared by reentrant guards ([`held`]), the guard itself
//! ([`guard`]), running work under a hold ([`guarded`]), multi-locks ([`multi`]),
//! reentrancy scopes ([`scope`]), renewal ([`watchdog`]), replica acknowledgement
//! ([`replicas`]), local-clock arithmetic ([`time`]), the client's holds ([`holds`]),
//! revocation by a forced release ([`revoke`]) and the client's shutdown ([`shutdown`]).
//!
//! Below them all, the [`engine`] (connections, settings in [`config`], the topology fan-out,
//! quorum and timeouts) that the client façade ([`crate::client`]) wraps: this module never
//! depends on the client. Inside it, the engine and the watchdog refer to each other (the
//! engine owns the watchdog's registry, the watchdog renews through the engine), as do a
//! hold and its engine: inherent to a registry of holds kept by their owner.

pub(crate) mod acquire;
pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod guard;
pub(crate) mod guarded;
pub(crate) mod health;
pub(crate) mod held;
pub(crate) mod holds;
pub(crate) mod multi;
pub(crate) mod options;
pub(crate) mod pending;
pub(crate) mod quorum;
pub(crate) mod replicas;
pub(crate) mod request;
pub(crate) mod revoke;
pub(crate) mod scope;
pub(crate) mod time;
pub(crate) mod watchdog;
pub(crate) mod write;
