//! What an operator reads: a lock's state ([`LockState`], [`Holding`]) from
//! [`LockClient::inspect`] and [`LockClient::list`], and the Functions library on the
//! servers ([`NodeLibraries`] from [`LockClient::list_functions`], the text in
//! [`FUNCTIONS_SOURCE`]). [`LockClient::force_release`] is the third tool.

// Inspecting one lock (`inspect`), listing locks with SCAN (`list`), forcing a release, and
// the Functions library's versions on the servers (`libraries`). The `impl LockClient`
// block below holds every operator method of the client, and nowhere else has one (see
// `crate::client` for the client's other blocks).

pub(crate) mod inspect;
pub(crate) mod libraries;
pub(crate) mod list;

pub use inspect::{Holding, LockState};
pub use libraries::{FunctionLibrary, FunctionNode, NodeLibraries, FUNCTIONS_SOURCE};

use futures_util::stream::{self, StreamExt};

use crate::client::handle::LockClient;
use crate::error::{bounded, LockError};
use crate::lock::revoke;
use crate::observe;
use crate::ops::list::glob_escape;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::library::LIBRARY_NAME;
use crate::protocol::name::{decode, encode_into, LockName};
use crate::protocol::{fcall, lock_calls};

/// Locks [`LockClient::list`] reads at once.
const LIST_IN_FLIGHT: usize = 64;

impl LockClient {
    /// Reads the lock `name` as it is in Redis now: holder, hold count, remaining lease,
    /// fencing token, waiters and the holder's metadata — or a read-write lock's readers or
    /// writer, or a semaphore's permit holders ([`LockState::mode`],
    /// [`LockState::holders`]). Takes no lock.
    ///
    /// Under Redlock every node is read and the lock is held only by an owner a quorum of
    /// them agrees on (shortest remaining lease among them, highest fencing token of all);
    /// a minority of nodes that does not answer is skipped.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], and the Redis errors.
    ///
    /// # Cancel safety
    /// Read-only: dropping the future changes nothing.
    pub async fn inspect(&self, name: impl Into<LockName>) -> Result<LockState, LockError> {
        let name = name.into();
        let keys = self.engine.keys(&name, LockMode::Exclusive)?;
        Ok(inspect::state(&self.engine, name, keys).await?.0)
    }

    /// Every lock under this client's key prefix whose name starts with `name_prefix`
    /// (`""` for all), held or not, sorted by key. Glob characters in `name_prefix` match
    /// only themselves. Uses SCAN (never KEYS), on every master of a Cluster and every
    /// Redlock node.
    ///
    /// With an empty key prefix (Redisson interop) every hash of the database is a
    /// candidate (distlock's own bookkeeping keys are no hashes), and every ZSET with a
    /// semaphore's records beside it.
    ///
    /// # Errors
    /// The Redis errors.
    ///
    /// # Cancel safety
    /// Read-only: dropping the future changes nothing.
    pub async fn list(&self, name_prefix: &str) -> Result<Vec<LockState>, LockError> {
        let prefix = self.engine.config.key_prefix.as_bytes();
        let mut wanted = prefix.to_vec();
        encode_into(&mut wanted, name_prefix.as_bytes());
        let mut pattern = glob_escape(&wanted);
        pattern.push(b'*');
        let keys = list::scan_keys(&self.engine, &pattern).await?;
        let mut states = stream::iter(keys)
            .map(|key| {
                let name = LockName::from(decode(&key[prefix.len()..]));
                inspect::state(
                    &self.engine,
                    name,
                    self.engine.keys_of(&key, LockMode::Exclusive),
                )
            })
            // In order, a bounded number in flight: a large keyspace neither floods the
            // connection nor holds every answer at once.
            .buffered(LIST_IN_FLIGHT);
        let mut locks = Vec::new();
        while let Some(state) = states.next().await {
            // A key deleted or replaced since the scan is no lock.
            if let (state, true) = state? {
                locks.push(state);
            }
        }
        Ok(locks)
    }

    /// Loads distlock's Redis Functions library on every node this client uses (every
    /// master of a Cluster, every Redlock node, the master Sentinels name), replacing a
    /// library of the same name and version. Clients load it by themselves where a call
    /// finds it missing; an operator loads it ahead of time for services whose Redis user may
    /// not run `FUNCTION LOAD` (least privilege: `FCALL` without `EVAL` or `FUNCTION`), as
    /// `distlock functions load` does. Returns the library's name, which carries its
    /// version.
    ///
    /// # Errors
    /// [`LockError::LibraryNotLoaded`] for a user without `FUNCTION LOAD`,
    /// [`LockError::ServerTooOld`] for a server without Redis Functions, and the Redis
    /// errors.
    ///
    /// # Cancel safety
    /// Dropped midway, some nodes may have the library and others not; calling again is
    /// safe.
    pub async fn load_functions(&self) -> Result<&'static str, LockError> {
        let what = LockName::from(LIBRARY_NAME);
        self.engine.refuse_if_down(&what)?;
        let timeout = self.engine.config.command_timeout;
        for conn in &self.engine.nodes {
            let mut conn = conn.clone();
            bounded(&what, timeout, fcall::load(&mut conn)).await?;
        }
        Ok(LIBRARY_NAME)
    }

    /// The version of distlock's Functions library this crate calls: its library is
    /// `distlock_<version>` ([`load_functions`](Self::load_functions)).
    pub const FUNCTIONS_VERSION: u32 = libraries::CURRENT_VERSION;

    /// The versions of distlock's Functions library on every node this client uses (as
    /// [`load_functions`](Self::load_functions) reaches them: each master of a Cluster, each
    /// Redlock node, the master Sentinels name), with `FUNCTION LIST LIBRARYNAME
    /// distlock_*`. Old versions stay after an upgrade until an operator removes them
    /// ([`remove_functions`](Self::remove_functions)). The Redis user needs `FUNCTION LIST`
    /// (`+function|list`; on a Cluster also `+cluster|slots`).
    ///
    /// # Errors
    /// [`LockError::Refused`] for a user without `FUNCTION LIST`, and the Redis errors of
    /// the first node that fails.
    ///
    /// # Cancel safety
    /// Read-only: dropping the future changes nothing.
    pub async fn list_functions(&self) -> Result<Vec<NodeLibraries>, LockError> {
        libraries::list(&self.engine).await
    }

    /// Deletes the library of `version` (`distlock_<version>`) from every node that has it
    /// (as [`list_functions`](Self::list_functions) reaches them), for operators: the nodes
    /// it was deleted from. Redis cannot tell which clients still call a version, so the
    /// caller states that none does. A client that still calls it gets `Function not
    /// found`, and then loads it again where its user may run `FUNCTION LOAD` — or fails
    /// with [`LockError::LibraryNotLoaded`] where it may not, acquisitions and renewals of
    /// its holds alike. Nothing stops this client's own version
    /// ([`FUNCTIONS_VERSION`](Self::FUNCTIONS_VERSION)) being removed: its next call loads it
    /// again, if it may. The Redis user needs `FUNCTION DELETE` (`+function|delete`).
    ///
    /// # Errors
    /// [`LockError::Refused`] for a user without `FUNCTION DELETE`, and the Redis errors of
    /// the first node that fails (the nodes before it have lost the library).
    ///
    /// # Cancel safety
    /// Dropped midway, some nodes may have lost the library and others not; calling again
    /// is safe.
    pub async fn remove_functions(&self, version: u32) -> Result<Vec<FunctionNode>, LockError> {
        libraries::remove(&self.engine, version).await
    }

    /// Deletes the lock `name` whoever holds it, for operators: its holder record goes too,
    /// the next queued waiter gets the lock (or every waiter is woken), and the former
    /// holder's client is told at once (a message on its own revocation channel), so that
    /// its guard reports the lock lost within milliseconds (lock-tower then aborts the
    /// request). A holder that misses the message (its pub/sub connection down, or a
    /// Redisson client) learns at its next renewal. A read-write lock loses all its readers
    /// or its writer, a semaphore all its permits. Until the former holder's work stops,
    /// mutual exclusion is broken: use it on stuck holders only.
    ///
    /// Answers `false` when the lock was not held;
    /// [`force_release_notified`](Self::force_release_notified) also says whether the
    /// holders heard.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], and the Redis errors.
    ///
    /// # Cancel safety
    /// Dropped after the call was sent, the lock may or may not have been released:
    /// [`inspect`](Self::inspect) tells.
    pub async fn force_release(&self, name: impl Into<LockName>) -> Result<bool, LockError> {
        Ok(self.force_release_notified(name).await?.is_some())
    }

    /// [`force_release`](Self::force_release), answering `None` when the lock was not held,
    /// else how many former holders' clients received the revocation (0: they learn at
    /// their next renewal, or are no distlock clients).
    ///
    /// # Errors
    /// [`LockError::InvalidName`], and the Redis errors.
    ///
    /// # Cancel safety
    /// As [`force_release`](Self::force_release).
    pub async fn force_release_notified(
        &self,
        name: impl Into<LockName>,
    ) -> Result<Option<usize>, LockError> {
        let name = name.into();
        // The holders to tell, and the mode: a read-write lock or a semaphore has functions of
        // its own (one Redis: no Redlock). A holder that changes between this read and the
        // delete is not told, and learns at its next renewal.
        let state = self.inspect(&name).await?;
        let owners: Vec<String> = (state.holders().iter())
            .map(|h| h.owner().to_owned())
            .collect();
        let mode = match self.engine.nodes.len() {
            1 => state.mode(),
            _ => None,
        };
        let kind = mode.unwrap_or(LockMode::Exclusive);
        let keys = self.engine.keys(&name, kind)?;
        // Every node: a Redlock lock lives on a majority of them.
        let call = lock_calls::force_release(&keys, self.engine.config.publish);
        let mut released = false;
        let mut first_error = None;
        for answer in self
            .engine
            .call_each(&name, self.engine.config.lease, call)
            .await
        {
            match answer {
                Ok(outcome) => released |= outcome.was_held(),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if let (false, Some(error)) = (released, first_error) {
            return Err(error);
        }
        if !released {
            return Ok(None);
        }
        let told = revoke::notify(&self.engine, &name, keys.lock(), &owners).await;
        let names = self.engine.config.trace_names;
        tracing::warn!(
            distlock.lock.name = observe::name(&name, names),
            holders = owners.len(),
            told,
            "force-released by an operator"
        );
        Ok(Some(told))
    }
}
