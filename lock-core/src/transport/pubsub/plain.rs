//! Plain pub/sub (`SUBSCRIBE`): one connection to one server at a time — the one server, a
//! Sentinel-named master, a Cluster seed or a Redlock node — reconnecting with backoff.
//!
//! After a reconnect every waiter is woken to retry (messages may have been missed while
//! disconnected; a retry finds a grant, since acquiring is idempotent).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::RedisResult;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{idle_for, next_command, pubsub_call, Command, Shared, MAX_BACKOFF, PING_EVERY};
#[cfg(feature = "sentinel")]
use crate::transport::sentinel::SentinelConn;

/// The servers a plain pub/sub connection goes to.
pub(super) enum Servers {
    Nodes(Vec<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(SentinelConn),
}

/// The task behind one pub/sub connection to a server (the one, a Sentinel-named master, a
/// Cluster seed or a Redlock node), reconnecting with backoff.
pub(super) struct Task {
    servers: Servers,
    next_client: usize,
    timeout: Duration,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
}

impl Task {
    pub(super) fn new(
        servers: Servers,
        timeout: Duration,
        shared: Arc<Shared>,
        commands: mpsc::UnboundedReceiver<Command>,
    ) -> Self {
        Self {
            servers,
            next_client: 0,
            timeout,
            shared,
            commands,
        }
    }

    pub(super) async fn run(mut self, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(50);
        // Stay idle until someone waits: clients that never wait hold no pub/sub connection.
        let Some(first) = next_command(&mut self.commands, &stop).await else {
            return;
        };
        let mut pending = Some(first);
        // Waiters may have missed messages only once a connection was lost or never came:
        // then every waiter is woken to retry as soon as one is up again.
        let mut missed = false;
        loop {
            let timeout = self.timeout;
            let connect = async {
                let client = self.pubsub_client().await?;
                client.get_async_pubsub().await
            };
            let connected = tokio::select! {
                () = stop.cancelled() => return,
                c = tokio::time::timeout(timeout, connect) => c,
            };
            match connected {
                Ok(Ok(pubsub)) => {
                    backoff = Duration::from_millis(50);
                    let (sink, stream) = pubsub.split();
                    let served = self.serve(sink, stream, &mut pending, missed, &stop).await;
                    // Messages published while reconnecting are missed: no early joins.
                    self.shared.set_live(None, false);
                    if !served {
                        return;
                    }
                }
                Ok(Err(error)) => tracing::debug!(%error, "pub/sub connect failed"),
                Err(_) => tracing::debug!("pub/sub connect timed out"),
            }
            missed = true;
            // While disconnected, barriers are answered `false` so nobody blocks on us.
            if !idle_for(&mut self.commands, backoff, &mut pending, &stop).await {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// The client to connect with next; rotates so a dead node is not retried forever.
    async fn pubsub_client(&mut self) -> redis::RedisResult<redis::Client> {
        match &self.servers {
            Servers::Nodes(clients) => {
                let client = clients[self.next_client % clients.len()].clone();
                self.next_client = self.next_client.wrapping_add(1);
                Ok(client)
            }
            #[cfg(feature = "sentinel")]
            Servers::Sentinel(sentinel) => sentinel.master_client().await,
        }
    }

    /// Serves one connection; false when the client is gone.
    async fn serve(
        &mut self,
        mut sink: PubSubSink,
        mut stream: PubSubStream,
        pending: &mut Option<Command>,
        missed: bool,
        stop: &CancellationToken,
    ) -> bool {
        let channels = self.shared.channel_names();
        if !channels.is_empty() && self.call(sink.subscribe(channels)).await.is_err() {
            return true;
        }
        self.shared.set_live(None, true);
        if missed {
            self.shared.wake_all();
        }
        tracing::debug!("pub/sub connected");
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            let command = match pending.take() {
                Some(c) => Some(c),
                None => tokio::select! {
                    () = stop.cancelled() => return false,
                    c = self.commands.recv() => match c { Some(c) => Some(c), None => return false },
                    message = stream.next() => match message {
                        Some(message) => {
                            if let (Ok(channel), Ok(payload)) = (message.get_channel::<Vec<u8>>(), message.get_payload::<Vec<u8>>()) {
                                self.shared.deliver(&channel, &payload);
                            }
                            None
                        }
                        None => return true,
                    },
                    _ = ping.tick() => {
                        // Any answer will do: in subscribed mode (RESP2) it is an array, not a string.
                        if self.call(sink.ping::<redis::Value>()).await.is_err() { return true; }
                        None
                    }
                },
            };
            let ok = match command {
                None => true,
                Some(Command::Subscribe(c)) => {
                    let subscribed = self.call(sink.subscribe(&c)).await.is_ok();
                    self.shared.set_live(Some(&c), subscribed);
                    subscribed
                }
                Some(Command::Unsubscribe(c)) => self.call(sink.unsubscribe(c)).await.is_ok(),
                Some(Command::Barrier(b)) => {
                    let _ = b.send(true);
                    true
                }
            };
            if !ok {
                return true;
            }
        }
    }

    async fn call<T>(&self, fut: impl Future<Output = RedisResult<T>>) -> Result<T, ()> {
        pubsub_call(self.timeout, fut).await
    }
}
