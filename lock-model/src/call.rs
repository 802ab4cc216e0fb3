//! [`CallState`]: a node's data while one script runs on it, with the bookkeeping every
//! command shares: lazy expiry, type checks, and what the call wrote and published.

use crate::clock::TimeCursor;
use crate::hash::Hash;
use crate::keyspace::{Entry, Keyspace, Stored};
use crate::pubsub::{Message, PubSub};
use crate::reply::Reply;
use crate::zset::ZSet;

/// The error Redis answers a command on a key of another type.
pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/// What a node carries besides its libraries: moved into a [`CallState`] while a script
/// runs (the Lua side reaches it through a shared cell), then moved back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct NodeData {
    pub(crate) keyspace: Keyspace,
    pub(crate) pubsub: PubSub,
    pub(crate) time: TimeCursor,
}

/// A node's data during one call.
#[derive(Debug)]
pub(crate) struct CallState {
    pub(crate) data: NodeData,
    /// The node's clock when the call started (ms): Redis freezes expiry at a script's
    /// start (`scriptTimeSnapshot`), so every command of the call sees this time.
    pub(crate) now: i64,
    /// Refuses writes: a `no-writes` function, or a call by `FCALL_RO`/`EVAL_RO`.
    pub(crate) read_only: bool,
    /// Keys the call wrote (lazily expired ones too), in first-write order.
    pub(crate) touched: Vec<Vec<u8>>,
    /// What the call published, with who heard it on this node.
    pub(crate) published: Vec<Message>,
}

impl CallState {
    pub(crate) fn new(data: NodeData, now: i64, read_only: bool) -> Self {
        Self {
            data,
            now,
            read_only,
            touched: Vec::new(),
            published: Vec::new(),
        }
    }

    /// Records that `key` changed (its final state replicates).
    pub(crate) fn touch(&mut self, key: &[u8]) {
        if !self.touched.iter().any(|k| k == key) {
            self.touched.push(key.to_vec());
        }
    }

    /// Deletes `key` when it has expired (Redis' lazy expiry, which also replicates a DEL).
    fn expire_if_due(&mut self, key: &[u8]) {
        if self
            .data
            .keyspace
            .raw(key)
            .is_some_and(|e| e.expired_at(self.now))
        {
            self.data.keyspace.remove(key);
            self.touch(key);
        }
    }

    /// The live entry of `key`.
    pub(crate) fn live(&mut self, key: &[u8]) -> Option<&Entry> {
        self.expire_if_due(key);
        self.data.keyspace.raw(key)
    }

    /// The live entry of `key`, to change in place (the caller touches it).
    pub(crate) fn live_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.expire_if_due(key);
        self.data.keyspace.raw_mut(key)
    }

    /// Deletes the live `key`; true when it was there.
    pub(crate) fn delete(&mut self, key: &[u8]) -> bool {
        self.expire_if_due(key);
        let deleted = self.data.keyspace.remove(key);
        if deleted {
            self.touch(key);
        }
        deleted
    }

    /// Sets `key` to `entry`.
    pub(crate) fn put(&mut self, key: &[u8], entry: Entry) {
        self.data.keyspace.put(key, Some(entry));
        self.touch(key);
    }

    /// The string at `key`; WRONGTYPE for another type.
    pub(crate) fn string(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        match self.live(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Stored::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Reply::error(WRONGTYPE)),
        }
    }

    /// The hash at `key`; WRONGTYPE for another type.
    pub(crate) fn hash(&mut self, key: &[u8]) -> Result<Option<&Hash>, Reply> {
        match self.live(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Stored::Hash(h)) => Ok(Some(h)),
            Some(_) => Err(Reply::error(WRONGTYPE)),
        }
    }

    /// The sorted set at `key`; WRONGTYPE for another type.
    pub(crate) fn zset(&mut self, key: &[u8]) -> Result<Option<&ZSet>, Reply> {
        match self.live(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Stored::ZSet(z)) => Ok(Some(z)),
            Some(_) => Err(Reply::error(WRONGTYPE)),
        }
    }

    /// Changes the hash at `key` with `change` (creating an empty one when missing and
    /// `create`), deleting the key if it is left empty. `None` when missing and not created.
    pub(crate) fn with_hash<R>(
        &mut self,
        key: &[u8],
        create: bool,
        change: impl FnOnce(&mut Hash) -> R,
    ) -> Result<Option<R>, Reply> {
        if self.hash(key)?.is_none() {
            if !create {
                return Ok(None);
            }
            self.data
                .keyspace
                .put(key, Some(Entry::new(Stored::Hash(Hash::default()))));
        }
        let Some(Entry {
            value: Stored::Hash(hash),
            ..
        }) = self.data.keyspace.raw_mut(key)
        else {
            unreachable!("checked above: a hash");
        };
        let result = change(hash);
        let empty = hash.is_empty();
        if empty {
            self.data.keyspace.remove(key);
        }
        self.touch(key);
        Ok(Some(result))
    }

    /// As [`Self::with_hash`], for a sorted set.
    pub(crate) fn with_zset<R>(
        &mut self,
        key: &[u8],
        create: bool,
        change: impl FnOnce(&mut ZSet) -> R,
    ) -> Result<Option<R>, Reply> {
        if self.zset(key)?.is_none() {
            if !create {
                return Ok(None);
            }
            self.data
                .keyspace
                .put(key, Some(Entry::new(Stored::ZSet(ZSet::default()))));
        }
        let Some(Entry {
            value: Stored::ZSet(zset),
            ..
        }) = self.data.keyspace.raw_mut(key)
        else {
            unreachable!("checked above: a sorted set");
        };
        let result = change(zset);
        let empty = zset.is_empty();
        if empty {
            self.data.keyspace.remove(key);
        }
        self.touch(key);
        Ok(Some(result))
    }
}
