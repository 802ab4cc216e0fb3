//! The waiters' connection on a Redis Cluster with sharded pub/sub: `SSUBSCRIBE` on the
//! master that owns each channel's slot (the lock's slot), over a RESP3 cluster connection
//! whose pushes carry the messages.
//!
//! The redis crate keeps the per-node connections and subscribes again after a reconnect;
//! every re-subscription it reports means messages on that channel may have been missed
//! meanwhile, so that channel's waiters are woken to retry. When a slot changes owner (a
//! failover), Redis itself unsubscribes the shard channels of that slot: those that still
//! have waiters are woken and subscribed again, on the new owner.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{idle_for, next_command, pubsub_call, Command, Shared, MAX_BACKOFF, PING_EVERY};

/// The sharded pub/sub task of one client.
pub(crate) struct Sharded {
    client: ClusterClient,
    pushes: mpsc::UnboundedReceiver<PushInfo>,
    timeout: Duration,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Confirmations still to come for this task's own `SSUBSCRIBE`s (`true`) and
    /// `SUNSUBSCRIBE`s (`false`), by channel: any other confirmation was not asked for here.
    expected: HashMap<(bool, Vec<u8>), usize>,
    /// Whether the last subscription succeeded (what a barrier answers).
    subscribed: bool,
}

impl Sharded {
    pub(crate) fn new(
        client: ClusterClient,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        timeout: Duration,
        shared: Arc<Shared>,
        commands: mpsc::UnboundedReceiver<Command>,
    ) -> Self {
        Self {
            client,
            pushes,
            timeout,
            shared,
            commands,
            expected: HashMap::new(),
            subscribed: false,
        }
    }

    pub(crate) async fn run(mut self, stop: CancellationToken) {
        // Stay idle until someone waits: clients that never wait hold no pub/sub connection.
        let Some(first) = next_command(&mut self.commands, &stop).await else {
            return;
        };
        let mut pending = Some(first);
        let Some(mut conn) = self.connect(&mut pending, &stop).await else {
            return;
        };
        for channel in self.shared.channel_names() {
            self.subscribe(&mut conn, channel).await;
        }
        // The first command's subscription, if any, was in the registry just replayed.
        if let Some(Command::Barrier(b)) = pending {
            let _ = b.send(self.subscribed);
        }
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                command = self.commands.recv() => match command {
                    None => return,
                    Some(command) => self.run_command(&mut conn, command).await,
                },
                push = self.pushes.recv() => match push {
                    None => return,
                    Some(push) => self.on_push(push),
                },
                // Traffic on every master, so a silently dead node connection is noticed
                // (the redis crate then reconnects it and subscribes again).
                _ = ping.tick() => {
                    let all = RoutingInfo::MultiNode((
                        MultipleNodeRoutingInfo::AllMasters,
                        Some(ResponsePolicy::AllSucceeded),
                    ));
                    let _ = pubsub_call(self.timeout, conn.route_command(redis::cmd("PING"), all)).await;
                }
            }
        }
    }

    /// Connects, retrying with backoff; `None` once the client is gone.
    async fn connect(
        &mut self,
        pending: &mut Option<Command>,
        stop: &CancellationToken,
    ) -> Option<ClusterConnection> {
        let mut backoff = Duration::from_millis(50);
        loop {
            let connect = self.client.get_async_connection();
            tokio::select! {
                () = stop.cancelled() => return None,
                connected = pubsub_call(self.timeout, connect) => {
                    if let Ok(conn) = connected {
                        tracing::debug!("sharded pub/sub connected");
                        return Some(conn);
                    }
                }
            }
            if !idle_for(&mut self.commands, backoff, pending, stop).await {
                return None;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn run_command(&mut self, conn: &mut ClusterConnection, command: Command) {
        match command {
            Command::Subscribe(channel) => self.subscribe(conn, channel).await,
            Command::Unsubscribe(channel) => {
                self.expect(false, &channel);
                if pubsub_call(self.timeout, conn.sunsubscribe(&channel))
                    .await
                    .is_err()
                {
                    self.confirmed(false, &channel);
                }
            }
            Command::Barrier(b) => {
                let _ = b.send(self.subscribed);
            }
        }
    }

    async fn subscribe(&mut self, conn: &mut ClusterConnection, channel: Vec<u8>) {
        if !self.shared.has_channel(&channel) {
            // Its waiters left while this was queued: the unsubscribe is queued too.
            return;
        }
        self.expect(true, &channel);
        self.subscribed = pubsub_call(self.timeout, conn.ssubscribe(&channel))
            .await
            .is_ok();
        if !self.subscribed {
            // No confirmation will come; the waiters rely on the holder's TTL.
            self.confirmed(true, &channel);
        }
        self.shared.set_live(Some(&channel), self.subscribed);
    }

    fn expect(&mut self, subscribe: bool, channel: &[u8]) {
        *self
            .expected
            .entry((subscribe, channel.to_vec()))
            .or_default() += 1;
    }

    /// Counts one expected confirmation as come; false if none was expected.
    fn confirmed(&mut self, subscribe: bool, channel: &[u8]) -> bool {
        let key = (subscribe, channel.to_vec());
        match self.expected.get_mut(&key) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                self.expected.remove(&key);
            }
            None => return false,
        }
        true
    }

    fn on_push(&mut self, push: PushInfo) {
        let bytes = |value: Option<&Value>| match value {
            Some(Value::BulkString(bytes)) => Some(bytes.clone()),
            _ => None,
        };
        match push.kind {
            PushKind::SMessage => {
                if let (Some(channel), Some(payload)) =
                    (bytes(push.data.first()), bytes(push.data.get(1)))
                {
                    self.shared.deliver(&channel, &payload);
                }
            }
            PushKind::SSubscribe => {
                let Some(channel) = bytes(push.data.first()) else {
                    return;
                };
                if !self.confirmed(true, &channel) {
                    tracing::debug!("sharded pub/sub subscribed again; waking its waiters");
                    self.shared.set_live(Some(&channel), true);
                    self.shared.wake(&channel);
                }
            }
            PushKind::SUnsubscribe => {
                let Some(channel) = bytes(push.data.first()) else {
                    return;
                };
                if !self.confirmed(false, &channel) && self.shared.has_channel(&channel) {
                    // Redis dropped the subscription (its slot moved): subscribe again, on
                    // the slot's new owner; until then messages may be missed.
                    tracing::debug!("a shard channel's slot moved; subscribing again");
                    self.shared.set_live(Some(&channel), false);
                    self.shared.wake(&channel);
                    self.shared.request(Command::Subscribe(channel));
                }
            }
            PushKind::Disconnection => {
                // Messages may be missed until the redis crate subscribes again: no early
                // joins, and every waiter retries now.
                self.shared.set_live(None, false);
                self.shared.wake_all();
            }
            _ => {}
        }
    }
}
