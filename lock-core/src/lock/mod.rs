//! A lock's lifecycle: the request and its options ([`request`]), the acquisition
//! ([`acquire`], with its clean-up guard [`pending`] and the Redlock tallies of
//! [`quorum`]), the hold shared by reentrant guards ([`held`]), the guard itself
//! ([`guard`]), running work under a hold ([`guarded`]), multi-locks ([`multi`]),
//! reentrancy scopes ([`scope`]), renewal ([`watchdog`]), replica acknowledgement
//! ([`replicas`]), local-clock arithmetic ([`time`]), the client's holds ([`holds`]),
//! revocation by a forced release ([`revoke`]) and the client's shutdown ([`shutdown`]).
//!
//! This module and [`crate::client`] depend on each other, by design: the client makes
//! requests and owns the watchdog's registry, and a request, a hold and the watchdog call
//! Redis through the client they belong to.

pub(crate) mod acquire;
pub(crate) mod guard;
pub(crate) mod guarded;
pub(crate) mod held;
pub(crate) mod holds;
pub(crate) mod multi;
pub(crate) mod pending;
pub(crate) mod quorum;
pub(crate) mod replicas;
pub(crate) mod request;
pub(crate) mod revoke;
pub(crate) mod scope;
pub(crate) mod shutdown;
pub(crate) mod time;
pub(crate) mod watchdog;
