//! A lock's lifecycle, in layers that only look down (no module here imports one above it).
//!
//! One acquisition, `client.lock(n).await`, read top-down:
//!
//! 1. [`request`]: the [`LockRequest`](request::LockRequest) and its [`options`]; awaiting
//!    it runs
//! 2. [`acquire`]: re-entry from the caller's [`scope`], else the hold's [`identity`]
//!    (keys, owner, capacity, lease, metadata, label), built once, and attempts for it
//!    through the engine — at once, or waiting in the fair queue ([`queued`]) — with the
//!    clean-up guard [`pending`] and the Redlock tallies of [`quorum`]; a grant becomes
//! 3. a [`guard`] over a [`held`] hold (that identity and its token), which joins the
//!    client's [`hold_registry`] (the registry the [`watchdog`] renews, [`revoke`] marks lost and
//!    the shutdown releases) and the scope;
//! 4. [`engine`], at the bottom: connections, settings ([`config`], [`health`]), the
//!    topology fan-out and timeouts, through which every call reaches Redis
//!    ([`crate::protocol`] builds the calls).
//!
//! Beside them: running work under a hold ([`guarded_run`]) as the [`current_lock`],
//! multi-locks ([`multi`]),
//! guarded writes ([`guarded_write`]), replica acknowledgement ([`replicas`]) and
//! local-clock arithmetic ([`time`]). The client façade ([`crate::client`]) holds an engine
//! and its holds; this module never depends on it.

pub(crate) mod acquire;
pub(crate) mod claim;
pub(crate) mod config;
pub(crate) mod current_lock;
pub(crate) mod engine;
pub(crate) mod guard;
pub(crate) mod guarded_run;
pub(crate) mod guarded_write;
pub(crate) mod health;
pub(crate) mod held;
pub(crate) mod hold_registry;
pub(crate) mod identity;
#[cfg(test)]
mod layers;
pub(crate) mod multi;
pub(crate) mod options;
pub(crate) mod pending;
pub(crate) mod queued;
pub(crate) mod quorum;
pub(crate) mod replicas;
pub(crate) mod request;
pub(crate) mod revoke;
pub(crate) mod scope;
pub(crate) mod time;
pub(crate) mod watchdog;
