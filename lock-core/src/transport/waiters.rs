//! Release notifications: one pub/sub connection per client carries every channel that has
//! a waiter, and a channel is unsubscribed as soon as its last waiter leaves.
//!
//! Two kinds of message arrive: a plain release (`0` or `1`, from Redisson clients or when
//! nobody was queued) on the lock's release channel wakes every waiter of the channel to
//! retry; a grant (`distlock:grant:<owner>:<token>`) goes to the one waiter it names, which
//! now holds the lock. Grants travel on a channel of distlock's own beside Redisson's, one
//! per lock and client (`distlock__claim:{<key>}:<client id>`, same slot), so a waiter
//! listens on both, and a grant reaches only its waiter's process: Redisson's clients only
//! ever read their own `0`/`1` on theirs. Waiters never depend on a message alone: each also retries when the holder's TTL
//! runs out, and after a pub/sub reconnect every waiter is woken to retry (messages may have
//! been missed while disconnected; a retry finds a grant, since acquiring is idempotent).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::protocol::name::LockKeys;
use crate::transport::pubsub::{self, Channel, Command, PubSubSource, Shared};

/// The client's registry of waited-on channels and the handle to its pub/sub task.
#[derive(Debug, Clone)]
pub(crate) struct Waiters {
    shared: Arc<Shared>,
}

/// One waiter's subscription to a lock's release channel and (unless under Redlock) its
/// client's grants channel; leaves each channel when its last waiter drops it.
#[derive(Debug)]
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    owner: String,
    release: Joined,
    grants: Option<Joined>,
    grant: Option<oneshot::Receiver<u64>>,
}

/// One channel a waiter joined, with the channel's wake-up signal.
#[derive(Debug)]
struct Joined {
    channel: Vec<u8>,
    wake: watch::Receiver<u64>,
}

impl Joined {
    /// Resolves when the channel is woken (a release message, or a reconnect).
    async fn woken(&mut self) {
        if self.wake.changed().await.is_err() {
            // The channel entry is gone only after this waiter left: nothing to wait for.
            std::future::pending::<()>().await;
        }
    }
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
            let has_grants = self.grants.is_some();
            tokio::select! {
                token = async { self.grant.as_mut().expect("guarded").await }, if granted => {
                    match token {
                        Ok(token) => return Wake::Granted(token),
                        Err(_) => self.grant = None,
                    }
                }
                () = self.release.woken() => return Wake::Released,
                // Woken only by a reconnect: a grant may have been missed, so retry.
                () = async { self.grants.as_mut().expect("guarded").woken().await }, if has_grants => {
                    return Wake::Released;
                }
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.grants().remove(&self.owner);
        let mut channels = self.shared.channels();
        for joined in std::iter::once(&mut self.release).chain(self.grants.as_mut()) {
            if let Some(entry) = channels.get_mut(&joined.channel) {
                entry.waiters -= 1;
                if entry.waiters == 0 {
                    channels.remove(&joined.channel);
                    // Sent under the registry lock, so commands keep the order of the counts.
                    let channel = std::mem::take(&mut joined.channel);
                    (self.shared).request(Command::Unsubscribe(channel));
                }
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

    /// Subscribes `owner` to the channels of the lock `keys` (release, and with `grants` its
    /// client's grants channel) and waits (at most `timeout`) until Redis confirmed it, so a release or grant published
    /// after this returns is seen. If pub/sub is down, returns anyway: the waiter then
    /// relies on the holder's TTL and its own retries.
    pub(crate) async fn subscribe(
        &self,
        keys: &LockKeys,
        owner: &str,
        timeout: Duration,
        grants: bool,
    ) -> Subscription {
        let grants_channel = grants.then(|| keys.grants_channel(owner));
        let (grant_tx, grant) = oneshot::channel();
        self.shared.grants().insert(owner.to_owned(), grant_tx);
        let (barrier, confirmed) = oneshot::channel();
        let (release, grants) = {
            let mut registry = self.shared.channels();
            let mut join = |channel: &[u8], grants: bool| {
                let entry = registry.entry(channel.to_vec()).or_insert_with(|| {
                    self.shared.request(Command::Subscribe(channel.to_vec()));
                    Channel {
                        wake: watch::Sender::new(0),
                        waiters: 0,
                        live: false,
                        grants,
                    }
                });
                entry.waiters += 1;
                Joined {
                    channel: channel.to_vec(),
                    wake: entry.wake.subscribe(),
                }
            };
            let release = join(keys.channel(), false);
            let grants = grants_channel.as_deref().map(|grants| join(grants, true));
            self.shared.request(Command::Barrier(barrier));
            (release, grants)
        };
        let subscription = Subscription {
            shared: Arc::clone(&self.shared),
            owner: owner.to_owned(),
            release,
            grants,
            grant: Some(grant),
        };
        let live = tokio::time::timeout(timeout, confirmed).await;
        if !matches!(live, Ok(Ok(true))) {
            tracing::debug!("release channel not confirmed; waiting by the holder's TTL");
        }
        subscription
    }

    /// Joins the channels of the lock `keys` for `owner` if this client's subscriptions to them are
    /// live, without a Redis command: another waiter of this client is already there. Done
    /// before the first attempt, it sees every release and grant after that attempt, so a
    /// busy answer needs no second attempt after subscribing (one command less per
    /// contended acquisition).
    pub(crate) fn join_live(
        &self,
        keys: &LockKeys,
        owner: &str,
        grants: bool,
    ) -> Option<Subscription> {
        let live = |registry: &HashMap<Vec<u8>, Channel>, channel: &[u8]| {
            registry.get(channel).is_some_and(|entry| entry.live)
        };
        // Uncontended acquisitions stop here, before the grants channel is spelled.
        if !live(&self.shared.channels(), keys.channel()) {
            return None;
        }
        let grants_channel = grants.then(|| keys.grants_channel(owner));
        let (release, grants) = {
            let mut registry = self.shared.channels();
            let all_live = std::iter::once(keys.channel())
                .chain(grants_channel.as_deref())
                .all(|c| live(&registry, c));
            if !all_live {
                return None;
            }
            let mut join = |channel: &[u8]| {
                let entry = registry.get_mut(channel).expect("checked live above");
                entry.waiters += 1;
                Joined {
                    channel: channel.to_vec(),
                    wake: entry.wake.subscribe(),
                }
            };
            (join(keys.channel()), grants_channel.as_deref().map(join))
        };
        let (grant_tx, grant) = oneshot::channel();
        self.shared.grants().insert(owner.to_owned(), grant_tx);
        Some(Subscription {
            shared: Arc::clone(&self.shared),
            owner: owner.to_owned(),
            release,
            grants,
            grant: Some(grant),
        })
    }

    /// Listens on the client's revocation channel from now on (see
    /// [`crate::lock::revoke`]); its messages go to the receiver, not to waiters.
    pub(crate) fn listen_revocations(&self, channel: Vec<u8>) -> mpsc::UnboundedReceiver<Vec<u8>> {
        self.shared.listen_revocations(channel)
    }

    /// Release channels with at least one waiter (for the workspace's tests: feature
    /// `__internal`).
    #[cfg(feature = "__internal")]
    pub(crate) fn channel_count(&self) -> usize {
        self.shared
            .channels()
            .values()
            .filter(|c| !c.grants)
            .count()
    }
}
