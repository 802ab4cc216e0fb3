//! The operator's view: inspect one lock, list locks, force a release.

use std::time::Duration;

use crate::error::LockError;
use crate::lock::engine::Engine;

use crate::protocol::holder::HolderInfo;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::lock_calls;
use crate::protocol::name::{LockKeys, LockName};
use crate::protocol::replies::{HoldingReply, InspectReply};

/// A snapshot of one lock in Redis, taken atomically by
/// [`LockClient::inspect`](crate::LockClient::inspect) or [`LockClient::list`](crate::LockClient::list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockState {
    name: LockName,
    key: Vec<u8>,
    owner: Option<String>,
    hold_count: u64,
    remaining_ttl: Option<Duration>,
    fencing_token: u64,
    waiters: usize,
    holder: Option<HolderInfo>,
    mode: Option<LockMode>,
    holders: Vec<Holding>,
}

/// One holder of a lock: its owner id, fencing token, remaining lease and record. A lock
/// has one; a read-write lock its readers or its writer; a semaphore one per permit held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    owner: String,
    fencing_token: u64,
    remaining_ttl: Option<Duration>,
    holder: Option<HolderInfo>,
}

impl Holding {
    /// The Redis owner id (a writer's ends in `:write`, as Redisson's do).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The hold's fencing token (0 for a holder without a record, e.g. a Redisson client).
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// What is left of this hold's lease (a reader's or a permit's own).
    pub fn remaining_ttl(&self) -> Option<Duration> {
        self.remaining_ttl
    }

    /// Who holds it, when the holder recorded it.
    pub fn holder(&self) -> Option<&HolderInfo> {
        self.holder.as_ref()
    }
}

impl From<HoldingReply> for Holding {
    fn from(reply: HoldingReply) -> Self {
        Self {
            owner: reply.owner,
            fencing_token: reply.token,
            remaining_ttl: reply.ttl,
            holder: reply.holder,
        }
    }
}

impl LockState {
    /// The lock's name (the key without the client's prefix, unescaped).
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// True when some owner holds the lock.
    pub fn is_held(&self) -> bool {
        self.owner.is_some()
    }

    /// The Redis owner id of the holder (`<client uuid>:<number>`, or Redisson's
    /// `<uuid>:<thread id>`).
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// How many times the owner holds the lock (above 1 only for reentrant Redisson holds;
    /// distlock counts re-entries in its scopes and holds once in Redis).
    pub fn hold_count(&self) -> u64 {
        self.hold_count
    }

    /// The lock's remaining lease; `None` when it is free or has no expiry.
    pub fn remaining_ttl(&self) -> Option<Duration> {
        self.remaining_ttl
    }

    /// The last fencing token issued for this name (on one server, the holder's when
    /// distlock holds it; under Redlock the highest any node reports, which can be above the
    /// holder's: an attempt that failed to get a majority still counted on its nodes); 0 when
    /// none was ever issued.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// Waiters queued for the lock whose place has not expired.
    pub fn waiters(&self) -> usize {
        self.waiters
    }

    /// Who holds the lock, when the holder recorded it (distlock clients do by default).
    /// For a read-write lock, its writer or one of its readers; for a semaphore, one of its
    /// holders ([`holders`](Self::holders) has them all).
    pub fn holder(&self) -> Option<&HolderInfo> {
        self.holder.as_ref()
    }

    /// What is held: [`LockMode::Exclusive`] for a lock, [`LockMode::Read`] or
    /// [`LockMode::Write`] for a read-write lock (by its current mode),
    /// [`LockMode::Permit`] for a semaphore; `None` when nothing holds it.
    pub fn mode(&self) -> Option<LockMode> {
        self.mode
    }

    /// Every holder: the lock's one, a read-write lock's readers or writer, a semaphore's
    /// permit holders.
    pub fn holders(&self) -> &[Holding] {
        &self.holders
    }
}

/// The state of one lock, and whether its key is a hash (a lock) at all. Under Redlock
/// every node is read (see [`combine`]); a minority that does not answer is skipped.
pub(crate) async fn state(
    client: &Engine,
    name: LockName,
    keys: LockKeys,
) -> Result<(LockState, bool), LockError> {
    let (state, is_lock) = read(client, &name, &keys).await?;
    // A read-write lock or a semaphore keeps its waiters in its own queue: read it there.
    match state.mode {
        Some(kind) if kind.queue_prefix() != keys.mode().queue_prefix() => {
            let keys = client.keys_of(keys.lock(), kind);
            read(client, &name, &keys).await
        }
        _ => Ok((state, is_lock)),
    }
}

/// One INSPECT of `keys` on every node, combined.
async fn read(
    client: &Engine,
    name: &LockName,
    keys: &LockKeys,
) -> Result<(LockState, bool), LockError> {
    let call = lock_calls::inspect(keys);
    let answers = client.call_each(name, client.config.lease, call).await;
    let nodes = answers.len();
    let mut states = Vec::with_capacity(nodes);
    let mut first_error = None;
    for answer in answers {
        match answer {
            Ok(reply) => states.push(node_state(name, keys, reply)),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    let quorum = client.quorum();
    match first_error {
        Some(error) if states.len() < quorum => Err(error),
        _ => Ok(combine(states, quorum)),
    }
}

/// One node's INSPECT answer as a state, and whether the key is a hash.
fn node_state(name: &LockName, keys: &LockKeys, reply: InspectReply) -> (LockState, bool) {
    let (owner, hold_count) = match reply.owner {
        Some((owner, count)) => (Some(owner), count),
        None => (None, 0),
    };
    let (mode, holders) = match (reply.mode, &owner) {
        (Some(mode), _) if !reply.holdings.is_empty() => (
            Some(mode),
            reply.holdings.into_iter().map(Holding::from).collect(),
        ),
        (None, Some(owner)) => {
            let holding = Holding {
                owner: owner.clone(),
                fencing_token: reply.fencing_token,
                remaining_ttl: reply.remaining_ttl,
                holder: reply.holder.clone(),
            };
            (Some(LockMode::Exclusive), vec![holding])
        }
        _ => (None, Vec::new()),
    };
    let state = LockState {
        name: name.clone(),
        key: keys.lock().to_vec(),
        owner,
        hold_count,
        remaining_ttl: reply.remaining_ttl,
        fencing_token: reply.fencing_token,
        waiters: reply.waiters,
        holder: reply.holder,
        mode,
        holders,
    };
    (state, reply.is_lock)
}

/// The lock as a quorum of nodes sees it (one node: that node's view). Held only by an
/// owner a quorum agrees on, with the shortest remaining lease among them; the fencing token
/// and waiters are the highest any node reported. Keys on a minority (an acquisition under
/// way, or a node that missed a release) show as not held.
fn combine(mut states: Vec<(LockState, bool)>, quorum: usize) -> (LockState, bool) {
    if states.len() == 1 {
        return states.swap_remove(0);
    }
    let is_lock = states.iter().any(|(_, is_lock)| *is_lock);
    let token = states
        .iter()
        .map(|(s, _)| s.fencing_token)
        .max()
        .unwrap_or(0);
    let waiters = states.iter().map(|(s, _)| s.waiters).max().unwrap_or(0);
    let agreed = |owner: &Option<String>| {
        owner.is_some() && states.iter().filter(|(s, _)| &s.owner == owner).count() >= quorum
    };
    let held = states
        .iter()
        .filter(|(s, _)| agreed(&s.owner))
        .min_by_key(|(s, _)| s.remaining_ttl.unwrap_or(Duration::MAX))
        .map(|(s, _)| s.clone());
    let mut state = held.unwrap_or_else(|| LockState {
        owner: None,
        hold_count: 0,
        remaining_ttl: None,
        holder: None,
        mode: None,
        holders: Vec::new(),
        ..states[0].0.clone()
    });
    state.fencing_token = token;
    state.waiters = waiters;
    if state.holder.is_none() && state.owner.is_some() {
        state.holder = states.iter().find_map(|(s, _)| {
            s.holder
                .clone()
                .filter(|h| Some(h.owner()) == state.owner.as_deref())
        });
    }
    (state, is_lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(owner: Option<&str>, ttl_ms: u64, token: u64) -> (LockState, bool) {
        let state = LockState {
            name: LockName::from("n"),
            key: b"k".to_vec(),
            owner: owner.map(str::to_owned),
            hold_count: u64::from(owner.is_some()),
            remaining_ttl: owner.map(|_| Duration::from_millis(ttl_ms)),
            fencing_token: token,
            waiters: 0,
            holder: None,
            mode: None,
            holders: Vec::new(),
        };
        (state, owner.is_some())
    }

    #[test]
    fn a_quorum_owner_holds_with_the_shortest_lease_and_highest_token() {
        let nodes = vec![
            node(Some("a"), 900, 4),
            node(None, 0, 7),
            node(Some("a"), 800, 5),
        ];
        let (state, is_lock) = combine(nodes, 2);
        assert!(is_lock);
        assert_eq!(state.owner(), Some("a"));
        assert_eq!(state.remaining_ttl(), Some(Duration::from_millis(800)));
        assert_eq!(state.fencing_token(), 7);
    }

    #[test]
    fn a_minority_owner_is_not_a_holder() {
        let nodes = vec![node(Some("a"), 900, 4), node(None, 0, 3), node(None, 0, 3)];
        let (state, is_lock) = combine(nodes, 2);
        assert!(is_lock && !state.is_held());
        assert_eq!((state.hold_count(), state.remaining_ttl()), (0, None));
        assert_eq!(state.fencing_token(), 4);
    }

    #[test]
    fn one_node_is_taken_as_it_is() {
        let (state, _) = combine(vec![node(Some("a"), 900, 4)], 1);
        assert_eq!(state.owner(), Some("a"));
    }
}
