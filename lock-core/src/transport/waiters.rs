//! Release notifications: one pub/sub connection per client carries every channel that has
//! a waiter, and a channel is unsubscribed as soon as its last waiter leaves.
//!
//! Two kinds of message arrive: a plain release (`0`, from Redisson clients or when nobody
//! was queued) wakes every waiter of the channel to retry; a grant
//! (`distlock:grant:<owner>:<token>`) goes to the one waiter it names, which now holds the
//! lock. Waiters never depend on a message alone: each also retries when the holder's TTL
//! runs out, and after a pub/sub reconnect every waiter is woken to retry (messages may have
//! been missed while disconnected; a retry finds a grant, since acquiring is idempotent).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::transport::pubsub::{self, Channel, Command, PubSubSource, Shared};

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
                (self.shared).request(Command::Unsubscribe(std::mem::take(&mut self.channel)));
            }
        }
    }
}

impl Waiters {
    /// Starts the pub/sub task; it connects on the first subscription.
    pub(crate) fn start(source: PubSubSource, timeout: Duration, stop: CancellationToken) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new(commands));
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
                self.shared.request(Command::Subscribe(channel.to_vec()));
                Channel {
                    wake: watch::Sender::new(0),
                    waiters: 0,
                    live: false,
                }
            });
            entry.waiters += 1;
            self.shared.request(Command::Barrier(barrier));
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

    /// Listens on the client's revocation channel from now on (see
    /// [`crate::lock::revoke`]); its messages go to the receiver, not to waiters.
    pub(crate) fn listen_revocations(&self, channel: Vec<u8>) -> mpsc::UnboundedReceiver<Vec<u8>> {
        self.shared.listen_revocations(channel)
    }

    /// Channels with at least one waiter (for tests and inspection).
    pub(crate) fn channel_count(&self) -> usize {
        self.shared.channels().len()
    }
}
