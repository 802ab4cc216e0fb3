//! The bottom of the lock machinery: what a request, a hold, the watchdog and the
//! operator's tools call Redis through. It knows Redis only — connections, settings, the
//! topology fan-out, quorum and timeouts — and nothing of the holds made through it (the
//! client's registry of them, [`HoldRegistry`](super::hold_registry::HoldRegistry), sits above it).
//!
//! Its call entry points ([`Engine::call_until`], [`Engine::call_each`], [`Engine::call_one`],
//! [`Engine::query`]) are also the one gate of a known outage: while the client knows Redis
//! is down ([`health`](super::health)), a call that starts something is refused at once
//! with [`LockError::Unavailable`], as [`Function::fails_fast`] says, instead of waiting
//! its timeout; releases and renewals go on and probe.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
#[cfg(feature = "idempotency")]
use redis::Cmd;
use redis::FromRedisValue;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::client::replica_ack::ReplicaAck;
#[cfg(feature = "idempotency")]
use crate::error::bounded;
use crate::error::LockError;
use crate::lock::config::Config;
use crate::lock::health::Health;
use crate::protocol::fcall::Call;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::library::Function;
use crate::protocol::name::{LockKeys, LockName};
use crate::transport::backend::Conn;
use crate::transport::connect::{connect, ConnectOptions, Connections, Tls, Topology};
use crate::transport::replicas::ReplicaView;
use crate::transport::waiters::Waiters;

/// The engine of one client: its connections (one, or one per Redlock node), settings and
/// connection tasks, and the calls to Redis every request, hold and operation makes
/// through it — the topology fan-out, quorum and per-node timeouts.
pub(crate) struct Engine {
    /// The UUID that starts every owner id of this client (`<uuid>:<owner number>`).
    pub(crate) id: Arc<str>,
    pub(crate) config: Config,
    /// The holder metadata of acquisitions without a request id, encoded once.
    holder_meta: Arc<str>,
    /// One connection, or one per Redlock node.
    pub(crate) nodes: Vec<Conn>,
    /// The connection for replica acknowledgements (`WAIT`), unless they are off.
    pub(crate) replication: Option<Conn>,
    /// What the client knows of its masters' replicas, under [`ReplicaAck::Auto`].
    replicas: Option<Arc<ReplicaView>>,
    pub(crate) waiters: Waiters,
    /// Whether Redis answered lately (logged once per outage).
    pub(crate) health: Health,
    /// Stops the background tasks (at shutdown; the drop guard below when the client goes).
    pub(crate) stop: CancellationToken,
    /// The clean-ups left to the background (a dropped acquisition's queue leave, a dropped
    /// guard's release, a Redlock call's slow minority): `shutdown()` waits for them, since
    /// a process that ends right after it would otherwise cancel them with its runtime.
    pub(crate) cleanups: TaskTracker,
    _stop: DropGuard,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Shortest per-node timeout of a Redlock client.
const REDLOCK_MIN_NODE_TIMEOUT: Duration = Duration::from_millis(50);

impl Engine {
    /// Connects (lazily) and starts the background tasks (pub/sub, Sentinel following) of
    /// an engine with a validated `config`.
    pub(crate) fn start(
        topology: &Topology,
        tls: Option<&Tls>,
        config: Config,
    ) -> Result<Arc<Self>, LockError> {
        let options = ConnectOptions {
            connect_timeout: config.connect_timeout,
            command_timeout: config.command_timeout,
            replication: config.replica_ack != ReplicaAck::Off,
            #[cfg(feature = "cluster")]
            publish: config.publish,
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            LockError::invalid_config("LockClient must be built inside a Tokio runtime")
        })?;
        let Connections {
            nodes,
            pubsub,
            replication,
            probe,
        } = connect(topology, tls, &options)?;
        let replicas = match config.replica_ack {
            ReplicaAck::Auto { .. } => {
                let conn = nodes[0].clone();
                probe.map(|probe| Arc::new(ReplicaView::new(probe, conn, config.command_timeout)))
            }
            _ => None,
        };
        crate::observe::describe();
        let stop = CancellationToken::new();
        let _guard = runtime.enter();
        let waiters = Waiters::start(pubsub, config.command_timeout, stop.child_token());
        #[cfg(feature = "sentinel")]
        {
            let sentinels: Vec<_> = (nodes.iter().chain(&replication))
                .filter_map(Conn::as_sentinel)
                .cloned()
                .collect();
            if !sentinels.is_empty() {
                let follow = crate::transport::sentinel::follow_master;
                runtime.spawn(follow(sentinels, stop.child_token()));
            }
        }
        let engine = Arc::new(Engine {
            id: uuid::Uuid::new_v4().to_string().into(),
            nodes,
            replication,
            replicas,
            waiters,
            health: Health::new(config.trace_names),
            stop: stop.clone(),
            cleanups: TaskTracker::new(),
            _stop: stop.drop_guard(),
            holder_meta: Arc::from(config.holder.encode(None)),
            config,
        });
        Ok(engine)
    }

    /// How many replicas an acquisition of the lock whose key is `key` waits for, and for
    /// how long (`None`: it does not wait), when that is known without a round trip: always,
    /// but under [`ReplicaAck::Auto`] before the client learned its masters' replicas.
    pub(crate) fn replica_ack_known(&self, key: &[u8]) -> Option<Option<(usize, Duration)>> {
        match self.config.replica_ack {
            ReplicaAck::Require { replicas, timeout } => Some(Some((replicas, timeout))),
            ReplicaAck::Auto { timeout } => match &self.replicas {
                // Redlock keeps its own rule.
                None => Some(None),
                Some(view) => view.known(key).map(|n| (n > 0).then_some((1, timeout))),
            },
            ReplicaAck::Off => Some(None),
        }
    }

    /// [`replica_ack_known`](Self::replica_ack_known), learning the masters' replicas first
    /// when it is not known (one round trip, or two with a new connection: at connect time
    /// and after the topology changed, not per acquisition).
    ///
    /// # Errors
    /// [`LockError::Unavailable`] at once while Redis is known down, and the errors of the
    /// question (see [`ReplicaView::learn`]).
    pub(crate) async fn replica_ack(
        &self,
        name: &LockName,
        key: &[u8],
    ) -> Result<Option<(usize, Duration)>, LockError> {
        if let Some(known) = self.replica_ack_known(key) {
            return Ok(known);
        }
        let (Some(view), ReplicaAck::Auto { timeout }) = (&self.replicas, self.config.replica_ack)
        else {
            unreachable!("only an unlearned Auto is unknown");
        };
        self.refuse_if_down(name)?;
        // Not taken into the health: the question goes through a connection of its own
        // (one server, Sentinel), which may answer while the command connection does not.
        let replicas = view.learn(name, key).await?;
        Ok((replicas > 0).then_some((1, timeout)))
    }

    /// After an acquisition that fewer replicas acknowledged than it waited for: under
    /// [`ReplicaAck::Auto`], the next one asks again which masters have replicas (the
    /// master may have lost its replica for good, or a Cluster failed over unseen).
    pub(crate) fn forget_replicas(&self) {
        if let Some(view) = &self.replicas {
            view.forget();
        }
    }

    /// The holder metadata an acquisition sends: the client's own, shared, unless the
    /// request names a request id.
    pub(crate) fn holder_meta(&self, request_id: Option<&str>) -> Arc<str> {
        match request_id {
            None => Arc::clone(&self.holder_meta),
            Some(_) => Arc::from(self.config.holder.encode(request_id)),
        }
    }

    /// The keys of the lock `name` under this client's prefix.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty name or one above the client's limit.
    pub(crate) fn keys(&self, name: &LockName, kind: LockMode) -> Result<LockKeys, LockError> {
        if let Some(reason) = name.invalid_reason(self.config.max_name_len) {
            return Err(LockError::InvalidName {
                name: name.clone(),
                reason,
            });
        }
        let fenced = self.nodes.len() > 1;
        let keys = LockKeys::new(&self.config.key_prefix, name, kind, fenced);
        Ok(keys.sharded(self.is_sharded()))
    }

    /// The keys of the lock of `kind` whose Redis key is `lock` (as found by a scan).
    pub(crate) fn keys_of(&self, lock: &[u8], kind: LockMode) -> LockKeys {
        LockKeys::for_key(lock, kind, self.nodes.len() > 1).sharded(self.is_sharded())
    }

    /// True on a Cluster, whose slots may move between nodes.
    fn is_sharded(&self) -> bool {
        #[cfg(feature = "cluster")]
        return self.nodes[0].is_cluster();
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// The connection for calls that go to one place (the server, the Cluster, or the first
    /// Redlock node).
    pub(crate) fn conn(&self) -> Conn {
        self.nodes[0].clone()
    }

    /// How many nodes must agree: 1, or a majority of the Redlock nodes.
    pub(crate) fn quorum(&self) -> usize {
        crate::lock::quorum::quorum(self.nodes.len())
    }

    /// Bound on one call to one node: the command timeout, or for Redlock nodes a hundredth
    /// of the lease of the lock concerned (at least 50 ms), so a slow or dead minority cannot
    /// eat the lease.
    fn node_timeout(&self, lease: Duration) -> Duration {
        match self.nodes.len() {
            1 => self.config.command_timeout,
            _ => (self.config.command_timeout).min((lease / 100).max(REDLOCK_MIN_NODE_TIMEOUT)),
        }
    }

    /// Runs one function call about a lock with `lease` on every node at once, each within the
    /// node timeout, and waits for every answer.
    pub(crate) async fn call_each<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
    ) -> Vec<Result<T, LockError>> {
        self.call_until(name, lease, call, |_| false).await
    }

    /// Runs one function call on every node at once, each within the node timeout, and returns
    /// the answers so far (in arrival order) as soon as `decided` says they settle the
    /// outcome, or when all are in.
    ///
    /// Redlock: a dead or slow minority then costs the caller nothing once a quorum has
    /// answered. The calls still pending run on in the background until they answer or time
    /// out, so every reachable node gets the write: a lock on a bare majority would be lost
    /// with any one of its nodes (and a node's first call, which loads the functions library,
    /// is the slowest). Used only with idempotent functions (acquire, renew, fence floor): a late hold
    /// on a node is this owner's and goes with its renewal, release or lease.
    ///
    /// While Redis is known down, a function that [fails fast](Function::fails_fast) is not
    /// sent: the one answer is [`LockError::Unavailable`].
    pub(crate) async fn call_until<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
        decided: impl FnMut(&[Result<T, LockError>]) -> bool,
    ) -> Vec<Result<T, LockError>> {
        (self.call_until_then(name, lease, call, decided, |_, _| None)).await
    }

    /// [`call_until`](Self::call_until), and each answer that comes in the background, after
    /// the outcome was decided, goes to `late` with its node's index: the clean-up it returns
    /// (a call to that node) runs there and then, so after the answered call.
    pub(crate) async fn call_until_then<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
        mut decided: impl FnMut(&[Result<T, LockError>]) -> bool,
        mut late: impl FnMut(usize, Result<T, LockError>) -> Option<BoxFuture<'static, ()>>
            + Send
            + 'static,
    ) -> Vec<Result<T, LockError>> {
        if let Err(refused) = self.gate(name, call.function()) {
            return vec![Err(refused)];
        }
        if let [conn] = self.nodes.as_slice() {
            // One server: one call, nothing to share with other nodes' calls.
            let mut conn = conn.clone();
            let timeout = self.node_timeout(lease);
            let load_timeout = self.config.command_timeout;
            let answers = vec![call.invoke(&mut conn, name, timeout, load_timeout).await];
            self.observe(&answers);
            return answers;
        }
        let mut calls = self.call_stream(name, lease, call);
        let mut answers = Vec::with_capacity(self.nodes.len());
        while let Some((_, answer)) = calls.next().await {
            answers.push(answer);
            if decided(&answers) {
                break;
            }
        }
        self.observe(&answers);
        if !calls.is_empty() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let rest = async move {
                    while let Some((node, answer)) = calls.next().await {
                        if let Some(clean_up) = late(node, answer) {
                            clean_up.await;
                        }
                    }
                };
                self.cleanups.spawn_on(rest, &runtime);
            }
        }
        answers
    }

    /// Runs one function call on Redlock node `node` (an index of
    /// [`nodes`](Self::nodes)), within the node timeout.
    pub(crate) async fn call_node<T: FromRedisValue + Send>(
        &self,
        node: usize,
        name: &LockName,
        lease: Duration,
        call: &Call<T>,
    ) -> Result<T, LockError> {
        let mut conn = self.nodes[node].clone();
        let timeout = self.node_timeout(lease);
        call.invoke(&mut conn, name, timeout, self.config.command_timeout)
            .await
    }

    /// Runs one function call about the lock `name` where calls go to one place (the server,
    /// the Cluster, or the first Redlock node), within the command timeout.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] at once while Redis is known down (for a function that
    /// [fails fast](Function::fails_fast)), and the call's errors.
    pub(crate) async fn call_one<T: FromRedisValue + Send>(
        &self,
        name: &LockName,
        call: Call<T>,
    ) -> Result<T, LockError> {
        self.gate(name, call.function())?;
        let (mut conn, timeout) = (self.conn(), self.config.command_timeout);
        let answer = call.invoke(&mut conn, name, timeout, timeout).await;
        self.observe_one(&answer);
        answer
    }

    /// Sends one plain command about `name` (a record's read) where calls go to one place,
    /// within the command timeout.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] at once while Redis is known down, and the command's
    /// errors.
    #[cfg(feature = "idempotency")]
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        name: &LockName,
        cmd: &Cmd,
    ) -> Result<T, LockError> {
        self.refuse_if_down(name)?;
        let (mut conn, timeout) = (self.conn(), self.config.command_timeout);
        let answer = bounded(name, timeout, cmd.query_async(&mut conn)).await;
        self.observe_one(&answer);
        answer
    }

    /// The gate of tools that send their own commands (SCAN, `FUNCTION LOAD`): refused at
    /// once while Redis is known down, as a call through the engine would be.
    ///
    /// # Errors
    /// [`LockError::Unavailable`], naming `name`.
    pub(crate) fn refuse_if_down(&self, name: &LockName) -> Result<(), LockError> {
        self.health.gate(name)
    }

    /// The gate before a call of `function`: while Redis is known down, one that fails fast
    /// is refused (all but the probe); one that ends or keeps a hold goes.
    fn gate(&self, name: &LockName, function: Function) -> Result<(), LockError> {
        if function.fails_fast() {
            return self.health.gate(name);
        }
        Ok(())
    }

    /// Takes in the answer of a call to one place: on a Redlock client, one node's failure
    /// says nothing of the others, so only its answer counts.
    fn observe_one<T>(&self, answer: &Result<T, LockError>) {
        let outage = answer.as_ref().is_err_and(LockError::is_unavailable);
        if self.nodes.len() == 1 || !outage {
            self.observe(std::slice::from_ref(answer));
        }
    }

    /// Takes in the answers of one call: into the health, and a lost connection makes the
    /// masters' replicas unknown (it reconnects, maybe to another server).
    fn observe<T>(&self, answers: &[Result<T, LockError>]) {
        self.health.observe(answers);
        let lost = |a: &Result<T, LockError>| a.as_ref().is_err_and(LockError::is_connection_lost);
        if answers.iter().any(lost) {
            self.forget_replicas();
        }
    }

    /// One function call on every node at once, each within the node timeout: the answers
    /// as they arrive, owning all they need (`call_until` may leave them to a task).
    fn call_stream<T: FromRedisValue + Send + 'static>(
        &self,
        name: &LockName,
        lease: Duration,
        call: Call<T>,
    ) -> FuturesUnordered<impl Future<Output = (usize, Result<T, LockError>)> + Send + 'static>
    {
        let (call, timeout) = (Arc::new(call), self.node_timeout(lease));
        let load_timeout = self.config.command_timeout;
        let on = |(node, conn): (usize, &Conn)| {
            let (mut conn, name, call) = (conn.clone(), name.clone(), Arc::clone(&call));
            async move {
                let answer = call.invoke(&mut conn, &name, timeout, load_timeout).await;
                (node, answer)
            }
        };
        self.nodes.iter().enumerate().map(on).collect()
    }
}
