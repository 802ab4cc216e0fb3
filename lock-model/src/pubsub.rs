//! Pub/sub on a node: who subscribes to which channel, and what a publication reaches.

use std::collections::{BTreeMap, BTreeSet};

/// A client connection of the model (the explorer numbers them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u32);

/// A message published by a call: plain (`PUBLISH`) or sharded (`SPUBLISH`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Publication {
    /// The channel.
    pub channel: Vec<u8>,
    /// The payload.
    pub payload: Vec<u8>,
    /// True for `SPUBLISH` (a shard channel).
    pub sharded: bool,
}

/// A publication and the clients of one node it reaches (the node's subscribers of its
/// channel when it was published there), for the explorer to put in their mailboxes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    /// What was published.
    pub publication: Publication,
    /// Who hears it, in id order.
    pub receivers: Vec<ClientId>,
}

/// The subscriptions of a node's clients: channels and shard channels are separate
/// namespaces, as in Redis. Pattern subscriptions are not modelled (the library and
/// Redisson's lock clients use none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct PubSub {
    channels: BTreeMap<Vec<u8>, BTreeSet<ClientId>>,
    shard_channels: BTreeMap<Vec<u8>, BTreeSet<ClientId>>,
}

impl PubSub {
    fn namespace(&self, sharded: bool) -> &BTreeMap<Vec<u8>, BTreeSet<ClientId>> {
        if sharded {
            &self.shard_channels
        } else {
            &self.channels
        }
    }

    fn namespace_mut(&mut self, sharded: bool) -> &mut BTreeMap<Vec<u8>, BTreeSet<ClientId>> {
        if sharded {
            &mut self.shard_channels
        } else {
            &mut self.channels
        }
    }

    /// Subscribes `client` to `channel`.
    pub(crate) fn subscribe(&mut self, client: ClientId, channel: &[u8], sharded: bool) {
        self.namespace_mut(sharded)
            .entry(channel.to_vec())
            .or_default()
            .insert(client);
    }

    /// Unsubscribes `client` from `channel`.
    pub(crate) fn unsubscribe(&mut self, client: ClientId, channel: &[u8], sharded: bool) {
        let namespace = self.namespace_mut(sharded);
        if let Some(clients) = namespace.get_mut(channel) {
            clients.remove(&client);
            if clients.is_empty() {
                namespace.remove(channel);
            }
        }
    }

    /// Drops every subscription of `client` (its connection closed).
    pub(crate) fn unsubscribe_all(&mut self, client: ClientId) {
        for namespace in [&mut self.channels, &mut self.shard_channels] {
            namespace.retain(|_, clients| {
                clients.remove(&client);
                !clients.is_empty()
            });
        }
    }

    /// The subscribers of `channel` (`PUBSUB NUMSUB` / `SHARDNUMSUB` count them).
    pub(crate) fn subscribers(&self, channel: &[u8], sharded: bool) -> Vec<ClientId> {
        self.namespace(sharded)
            .get(channel)
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default()
    }

    /// True when `client` subscribes to `channel`.
    pub(crate) fn is_subscribed(&self, client: ClientId, channel: &[u8], sharded: bool) -> bool {
        self.namespace(sharded)
            .get(channel)
            .is_some_and(|c| c.contains(&client))
    }

    /// Delivers `publication` to this node's subscribers.
    pub(crate) fn deliver(&self, publication: Publication) -> Message {
        let receivers = self.subscribers(&publication.channel, publication.sharded);
        Message {
            publication,
            receivers,
        }
    }
}
