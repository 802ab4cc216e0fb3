//! The keyspace: keys, their values and their expiry on the node's clock.

use std::collections::BTreeMap;

use crate::hash::Hash;
use crate::zset::ZSet;

/// A key's value: the three types the library and its workloads use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stored {
    /// A string.
    String(Vec<u8>),
    /// A hash.
    Hash(Hash),
    /// A sorted set.
    ZSet(ZSet),
}

impl Stored {
    /// Its type as `TYPE` names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::String(_) => "string",
            Self::Hash(_) => "hash",
            Self::ZSet(_) => "zset",
        }
    }
}

/// A key's value and its expiry: an absolute time on the node's clock (ms), or none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub(crate) value: Stored,
    pub(crate) expires_at: Option<i64>,
}

impl Entry {
    /// A value without expiry.
    pub(crate) fn new(value: Stored) -> Self {
        Self {
            value,
            expires_at: None,
        }
    }

    /// The value.
    pub fn value(&self) -> &Stored {
        &self.value
    }

    /// When it expires, on the node's clock (ms).
    pub fn expires_at(&self) -> Option<i64> {
        self.expires_at
    }

    /// True when it has expired at `now` (the node's clock): Redis expires a key once the
    /// clock is past its expiry (`now > when`, `keyIsExpired`), so it still lives at `when`.
    pub fn expired_at(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|when| now > when)
    }
}

/// Every key of a node. Ordered, so that equal keyspaces hash equally.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Keyspace {
    entries: BTreeMap<Vec<u8>, Entry>,
}

impl Keyspace {
    /// The live entry of `key` at `now` (the node's clock): an expired key is absent.
    pub fn get(&self, key: &[u8], now: i64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| !e.expired_at(now))
    }

    /// Every live key at `now`, in key order.
    pub fn iter(&self, now: i64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.entries
            .iter()
            .filter(move |(_, e)| !e.expired_at(now))
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// The entry of `key`, expired or not.
    pub(crate) fn raw(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// The entry of `key`, expired or not, to change in place.
    pub(crate) fn raw_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.entries.get_mut(key)
    }

    /// Sets `key` to `entry`, or deletes it (`None`).
    pub(crate) fn put(&mut self, key: &[u8], entry: Option<Entry>) {
        match entry {
            Some(entry) => {
                self.entries.insert(key.to_vec(), entry);
            }
            None => {
                self.entries.remove(key);
            }
        }
    }

    /// Deletes `key`; true when it was there (expired or not).
    pub(crate) fn remove(&mut self, key: &[u8]) -> bool {
        self.entries.remove(key).is_some()
    }

    /// The keys expired at `now`.
    pub(crate) fn expired(&self, now: i64) -> Vec<Vec<u8>> {
        self.entries
            .iter()
            .filter(|(_, e)| e.expired_at(now))
            .map(|(k, _)| k.clone())
            .collect()
    }
}
