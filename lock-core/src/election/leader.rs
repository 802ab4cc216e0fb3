//! Who leads an election: one consistent snapshot of its term (LEADER).

use std::time::{Duration, SystemTime};

use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::protocol::fleet::{self, LeaderReply};
use crate::protocol::holder::HolderInfo;
use crate::protocol::name::{LockKeys, LockName};

/// The leader of an election, as [`Election::leader`](crate::election::Election::leader) and
/// [`Election::observe`](crate::election::Election::observe) read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    owner: String,
    token: u64,
    value: Option<String>,
    holder: Option<HolderInfo>,
    remaining_ttl: Option<Duration>,
}

impl Leader {
    /// The Redis owner id of the leader's hold.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The term's fencing token: every later term's is greater. Resources the leader
    /// writes to can reject writes of earlier terms with it.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// The value the leader proclaimed (its address, say), if any.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// Who leads (service, host, pid), when the leader's client records holders. For logs
    /// and operators: never show it to end users.
    pub fn holder(&self) -> Option<&HolderInfo> {
        self.holder.as_ref()
    }

    /// When the term began, by the Redis server's clock (from the term's token).
    pub fn since(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_micros(self.token)
    }

    /// What was left of the term's lease when it was read (renewed while the leader lives).
    pub fn remaining_ttl(&self) -> Option<Duration> {
        self.remaining_ttl
    }

    /// True when `other` is the same term with the same value (the lease aside).
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        self.token == other.token && self.owner == other.owner && self.value == other.value
    }

    fn of(reply: LeaderReply) -> Option<Self> {
        if reply.pttl == -2 || reply.owner.is_empty() {
            return None;
        }
        Some(Self {
            owner: reply.owner,
            token: reply.token,
            value: reply.value,
            holder: reply.holder,
            remaining_ttl: u64::try_from(reply.pttl).ok().map(Duration::from_millis),
        })
    }
}

/// Reads who leads the election `name` now.
///
/// # Errors
/// The Redis errors.
pub(crate) async fn read(
    client: &Engine,
    name: &LockName,
    keys: &LockKeys,
) -> Result<Option<Leader>, LockError> {
    let call = fleet::leader(keys);
    let answer = client.call_each(name, client.config.lease, call).await;
    let reply = answer.into_iter().next().expect("one node answers once")?;
    Ok(Leader::of(reply))
}
