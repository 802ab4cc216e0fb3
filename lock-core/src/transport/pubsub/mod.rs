//! The pub/sub connection of a client: subscribes and unsubscribes the channels that the
//! waiters' registry ([`crate::transport::waiters`]) asks for, and delivers their messages to
//! it. Two tasks do it, one per kind of pub/sub: [`plain`] (`SUBSCRIBE`, one server at a
//! time) and [`sharded`] (`SSUBSCRIBE` on a Cluster). Both take [`Command`]s from the
//! registry and deliver through [`Shared`], which live here, with the helpers both use.

mod plain;
#[cfg(feature = "cluster")]
mod sharded;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

#[cfg(feature = "cluster")]
use redis::cluster::ClusterClient;
#[cfg(feature = "cluster")]
use redis::PushInfo;
use redis::RedisResult;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::protocol::messages::Message;
#[cfg(feature = "sentinel")]
use crate::transport::sentinel::SentinelConn;

/// How often an idle pub/sub connection is pinged, to notice a silently dead connection.
pub(crate) const PING_EVERY: Duration = Duration::from_secs(5);
/// Longest pause between reconnection attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Starts the task for `source`; it connects on the first subscription.
pub(crate) fn spawn(
    source: PubSubSource,
    timeout: Duration,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    stop: CancellationToken,
) {
    match source {
        #[cfg(feature = "cluster")]
        PubSubSource::Sharded(client, pushes) => {
            let task = sharded::Sharded::new(*client, pushes, timeout, shared, commands);
            tokio::spawn(task.run(stop));
        }
        PubSubSource::Nodes(clients) => {
            let task = plain::Task::new(plain::Servers::Nodes(clients), timeout, shared, commands);
            tokio::spawn(task.run(stop));
        }
        #[cfg(feature = "sentinel")]
        PubSubSource::Sentinel(conn) => {
            let task = plain::Task::new(plain::Servers::Sentinel(conn), timeout, shared, commands);
            tokio::spawn(task.run(stop));
        }
    }
}

/// Where the pub/sub connection goes.
pub(crate) enum PubSubSource {
    /// The one server, each Cluster seed in turn (plain pub/sub), or each Redlock node in
    /// turn.
    Nodes(Vec<redis::Client>),
    /// The current master of a Sentinel-managed set (replicas see publishes too, but a
    /// failover may have killed the old master).
    #[cfg(feature = "sentinel")]
    Sentinel(SentinelConn),
    /// A Cluster with sharded pub/sub: a RESP3 cluster client and the pushes it sends.
    #[cfg(feature = "cluster")]
    Sharded(Box<ClusterClient>, mpsc::UnboundedReceiver<PushInfo>),
}

/// One waited-on channel in the registry.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) wake: watch::Sender<u64>,
    pub(crate) waiters: usize,
    /// Redis confirmed the subscription on the current connection: from now on no message
    /// on it is missed (a reconnect wakes every waiter, which retries).
    pub(crate) live: bool,
    /// A grants channel: its messages are grants, routed by owner (not counted as a
    /// channel waited on). Read only by that count (feature `__internal`).
    #[cfg_attr(not(feature = "__internal"), expect(dead_code))]
    pub(crate) grants: bool,
}

/// What the registry asks of the pub/sub task.
pub(crate) enum Command {
    Subscribe(Vec<u8>),
    Unsubscribe(Vec<u8>),
    /// Answered once every earlier command ran: `true` when they ran on a live connection.
    Barrier(oneshot::Sender<bool>),
}

/// The client's revocation channel and where its messages go.
type Revocations = (Vec<u8>, mpsc::UnboundedSender<Vec<u8>>);

/// The waiters' registry, shared by the waiters and the pub/sub task: channels with their
/// wake-up signals, and the owners waiting for a grant.
#[derive(Debug)]
pub(crate) struct Shared {
    channels: Mutex<HashMap<Vec<u8>, Channel>>,
    /// Waiting owners, to route grants to.
    grants: Mutex<HashMap<String, oneshot::Sender<u64>>>,
    /// The client's revocation channel, once it holds a lock, and where its messages go
    /// (see [`crate::lock::revoke`]).
    revocations: Mutex<Option<Revocations>>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Shared {
    pub(crate) fn new(commands: mpsc::UnboundedSender<Command>) -> Self {
        Self {
            channels: Mutex::default(),
            grants: Mutex::default(),
            revocations: Mutex::default(),
            commands,
        }
    }

    pub(crate) fn channels(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Channel>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn grants(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<u64>>> {
        self.grants.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn revocations(&self) -> MutexGuard<'_, Option<Revocations>> {
        self.revocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribes `channel` for good (replayed after reconnects) and hands its messages to
    /// the receiver.
    pub(crate) fn listen_revocations(&self, channel: Vec<u8>) -> mpsc::UnboundedReceiver<Vec<u8>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self.revocations() = Some((channel.clone(), sender));
        self.request(Command::Subscribe(channel));
        receiver
    }

    /// Routes one message: a revocation to its listener, a grant to its owner, anything else
    /// to the channel's waiters.
    pub(crate) fn deliver(&self, channel: &[u8], payload: &[u8]) {
        if let Some((revocations, sender)) = self.revocations().as_ref() {
            if revocations == channel {
                let _ = sender.send(payload.to_vec());
                return;
            }
        }
        match Message::parse(payload) {
            Message::Release => self.wake(channel),
            Message::Grant { owner, token } => {
                if let Some(waiter) = self.grants().remove(owner) {
                    let _ = waiter.send(token);
                }
            }
            Message::UnreadableGrant => {
                tracing::warn!("unreadable grant message: its waiter retries on its own");
            }
        }
    }

    /// True while `channel` has a waiter, or is the revocation channel.
    #[cfg(feature = "cluster")]
    pub(crate) fn has_channel(&self, channel: &[u8]) -> bool {
        self.channels().contains_key(channel)
            || (self.revocations().as_ref()).is_some_and(|(c, _)| c == channel)
    }

    /// Queues a command for the connection task, as a waiter would.
    pub(crate) fn request(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// The channels with a waiter and the revocation channel, to subscribe again after a
    /// reconnect.
    pub(crate) fn channel_names(&self) -> Vec<Vec<u8>> {
        let mut names: Vec<_> = self.channels().keys().cloned().collect();
        names.extend(self.revocations().as_ref().map(|(c, _)| c.clone()));
        names
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

/// The next command, or `None` once the client is gone.
pub(crate) async fn next_command(
    commands: &mut mpsc::UnboundedReceiver<Command>,
    stop: &CancellationToken,
) -> Option<Command> {
    tokio::select! {
        () = stop.cancelled() => None,
        c = commands.recv() => c,
    }
}

/// Waits `pause` while disconnected, answering barriers `false` so nobody blocks on the
/// connection (subscriptions are replayed from the registry on reconnect); false when the
/// client is gone.
pub(crate) async fn idle_for(
    commands: &mut mpsc::UnboundedReceiver<Command>,
    pause: Duration,
    pending: &mut Option<Command>,
    stop: &CancellationToken,
) -> bool {
    if let Some(Command::Barrier(b)) = pending.take() {
        let _ = b.send(false);
    }
    let until = tokio::time::Instant::now() + pause;
    loop {
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep_until(until) => return true,
            c = commands.recv() => match c {
                Some(Command::Barrier(b)) => { let _ = b.send(false); }
                Some(_) => {}
                None => return false,
            }
        }
    }
}

/// `fut` within `timeout`; failures are logged and end as `Err(())`.
pub(crate) async fn pubsub_call<T>(
    timeout: Duration,
    fut: impl Future<Output = RedisResult<T>>,
) -> Result<T, ()> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(error)) => {
            tracing::debug!(%error, "pub/sub command failed");
            Err(())
        }
        Err(_) => Err(()),
    }
}
