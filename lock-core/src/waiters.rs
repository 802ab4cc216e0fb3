//! Release notifications: one pub/sub connection per client carries every channel that has
//! a waiter, and a channel is unsubscribed as soon as its last waiter leaves.
//!
//! Two kinds of message arrive: a plain release (`0`, from Redisson clients or when nobody
//! was queued) wakes every waiter of the channel to retry; a grant
//! (`distlock:grant:<owner>:<token>`) goes to the one waiter it names, which now holds the
//! lock. Waiters never depend on a message alone: each also retries when the holder's TTL
//! runs out, and after a pub/sub reconnect every waiter is woken to retry (messages may have
//! been missed while disconnected; a retry finds a grant, since acquiring is idempotent).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::pubsub::{self, PubSubSource};
use crate::scripts::GRANT_PREFIX;

#[derive(Debug)]
struct Channel {
    wake: watch::Sender<u64>,
    waiters: usize,
    /// Redis confirmed the subscription on the current connection: from now on no message
    /// on it is missed (a reconnect wakes every waiter, which retries).
    live: bool,
}

pub(crate) enum Command {
    Subscribe(Vec<u8>),
    Unsubscribe(Vec<u8>),
    /// Answered once every earlier command ran: `true` when they ran on a live connection.
    Barrier(oneshot::Sender<bool>),
}

#[derive(Debug)]
pub(crate) struct Shared {
    channels: Mutex<HashMap<Vec<u8>, Channel>>,
    /// Waiting owners, to route grants to.
    grants: Mutex<HashMap<String, oneshot::Sender<u64>>>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Shared {
    fn channels(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Channel>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn grants(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<u64>>> {
        self.grants.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Routes one message: a grant to its owner, anything else to the channel's waiters.
    pub(crate) fn deliver(&self, channel: &[u8], payload: &[u8]) {
        if !payload.starts_with(GRANT_PREFIX) {
            return self.wake(channel);
        }
        match parse_grant(payload) {
            Some((owner, token)) => {
                if let Some(waiter) = self.grants().remove(owner) {
                    let _ = waiter.send(token);
                }
            }
            None => tracing::warn!("unreadable grant message: its waiter retries on its own"),
        }
    }

    /// True while `channel` has a waiter.
    pub(crate) fn has_channel(&self, channel: &[u8]) -> bool {
        self.channels().contains_key(channel)
    }

    /// Queues a command for the connection task, as a waiter would.
    pub(crate) fn request(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// The channels with a waiter, to subscribe again after a reconnect.
    pub(crate) fn channel_names(&self) -> Vec<Vec<u8>> {
        self.channels().keys().cloned().collect()
    }

    pub(crate) fn wake(&self, channel: &[u8]) {
        if let Some(entry) = self.channels().get(channel) {
            entry.wake.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Marks `channel` (every channel with `None`) as subscribed on the current connection,
    /// or not.
    pub(crate) fn set_live(&self, channel: Option<&[u8]>, live: bool) {
        let mut channels = self.channels();
        match channel {
            Some(channel) => {
                if let Some(entry) = channels.get_mut(channel) {
                    entry.live = live;
                }
            }
            None => channels.values_mut().for_each(|entry| entry.live = live),
        }
    }

    pub(crate) fn wake_all(&self) {
        for entry in self.channels().values() {
            entry.wake.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// The client's registry of waited-on channels and the handle to its pub/sub task.
#[derive(Debug, Clone)]
pub(crate) struct Waiters {
    shared: Arc<Shared>,
}

/// One waiter's subscription; unsubscribes the channel when its last waiter drops it.
#[derive(Debug)]
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: Vec<u8>,
    owner: String,
    wake: watch::Receiver<u64>,
    grant: Option<oneshot::Receiver<u64>>,
}

/// What woke a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A release (or reconnect): retry.
    Released,
    /// The lock was handed to this waiter, with this fencing token.
    Granted(u64),
}

impl Subscription {
    /// Listens for a grant again, after one that turned out stale.
    pub(crate) fn rearm_grant(&mut self) {
        let (grant_tx, grant) = oneshot::channel();
        self.shared.grants().insert(self.owner.clone(), grant_tx);
        self.grant = Some(grant);
    }

    /// Resolves on the next grant for this waiter, or release message or reconnect.
    pub(crate) async fn next(&mut self) -> Wake {
        loop {
            let granted = self.grant.is_some();
            tokio::select! {
                token = async { self.grant.as_mut().expect("guarded").await }, if granted => {
                    match token {
                        Ok(token) => return Wake::Granted(token),
                        Err(_) => self.grant = None,
                    }
                }
                changed = self.wake.changed() => {
                    if changed.is_ok() {
                        return Wake::Released;
                    }
                    // The channel entry is gone only after this waiter left: nothing to wait for.
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.grants().remove(&self.owner);
        let mut channels = self.shared.channels();
        if let Some(entry) = channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                channels.remove(&self.channel);
                // Sent under the registry lock, so commands keep the order of the counts.
                let _ = self
                    .shared
                    .commands
                    .send(Command::Unsubscribe(std::mem::take(&mut self.channel)));
            }
        }
    }
}

impl Waiters {
    /// Starts the pub/sub task; it connects on the first subscription.
    pub(crate) fn start(source: PubSubSource, timeout: Duration, stop: CancellationToken) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            channels: Mutex::default(),
            grants: Mutex::default(),
            commands,
        });
        pubsub::spawn(source, timeout, Arc::clone(&shared), receiver, stop);
        Self { shared }
    }

    /// Subscribes `owner` to `channel` and waits (at most `timeout`) until Redis confirmed
    /// it, so a release or grant published after this returns is seen. If pub/sub is down,
    /// returns anyway: the waiter then relies on the holder's TTL and its own retries.
    pub(crate) async fn subscribe(
        &self,
        channel: &[u8],
        owner: &str,
        timeout: Duration,
    ) -> Subscription {
        let (grant_tx, grant) = oneshot::channel();
        self.shared.grants().insert(owner.to_owned(), grant_tx);
        let (barrier, confirmed) = oneshot::channel();
        let wake = {
            let mut channels = self.shared.channels();
            let entry = channels.entry(channel.to_vec()).or_insert_with(|| {
                let _ = self
                    .shared
                    .commands
                    .send(Command::Subscribe(channel.to_vec()));
                Channel {
                    wake: watch::Sender::new(0),
                    waiters: 0,
                    live: false,
                }
            });
            entry.waiters += 1;
            let _ = self.shared.commands.send(Command::Barrier(barrier));
            entry.wake.subscribe()
        };
        let subscription = Subscription {
            shared: Arc::clone(&self.shared),
            channel: channel.to_vec(),
            owner: owner.to_owned(),
            wake,
            grant: Some(grant),
        };
        let live = tokio::time::timeout(timeout, confirmed).await;
        if !matches!(live, Ok(Ok(true))) {
            tracing::debug!("release channel not confirmed; waiting by the holder's TTL");
        }
        subscription
    }

    /// Joins `channel` for `owner` if this client's subscription to it is live, without a
    /// Redis command: another waiter of this client is already there. Done before the first
    /// attempt, it sees every release and grant after that attempt, so a busy answer needs
    /// no second attempt after subscribing (one command less per contended acquisition).
    pub(crate) fn join_live(&self, channel: &[u8], owner: &str) -> Option<Subscription> {
        let wake = {
            let mut channels = self.shared.channels();
            let entry = channels.get_mut(channel).filter(|entry| entry.live)?;
            entry.waiters += 1;
            entry.wake.subscribe()
        };
        let (grant_tx, grant) = oneshot::channel();
        self.shared.grants().insert(owner.to_owned(), grant_tx);
        Some(Subscription {
            shared: Arc::clone(&self.shared),
            channel: channel.to_vec(),
            owner: owner.to_owned(),
            wake,
            grant: Some(grant),
        })
    }

    /// Channels with at least one waiter (for tests and inspection).
    pub(crate) fn channel_count(&self) -> usize {
        self.shared.channels().len()
    }
}

/// The owner and fencing token of a grant message, `distlock:grant:<owner>:<token>` (owners
/// contain `:` themselves, tokens do not).
fn parse_grant(payload: &[u8]) -> Option<(&str, u64)> {
    let grant = std::str::from_utf8(payload.strip_prefix(GRANT_PREFIX)?).ok()?;
    let (owner, token) = grant.rsplit_once(':')?;
    Some((owner, token.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_name_the_owner_and_token() {
        let owner = "3db65fe7-939f-4757-93a2-a2f87f354cca:17";
        let grant = format!("distlock:grant:{owner}:1795436339923456");
        assert_eq!(
            parse_grant(grant.as_bytes()),
            Some((owner, 1_795_436_339_923_456))
        );
    }

    #[test]
    fn unreadable_grants_are_none() {
        // What Lua's `..` once made of a token above 10^14.
        assert_eq!(parse_grant(b"distlock:grant:u:1:1.7954357565964e+15"), None);
        assert_eq!(parse_grant(b"0"), None);
        assert_eq!(parse_grant(b"distlock:grant:no-token"), None);
    }
}
