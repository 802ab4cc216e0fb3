//! Is Redis reachable? [`LockClient::ping`] for readiness probes, and the engine's view from
//! every call it makes ([`crate::lock::health`]).

use futures_util::future::join_all;

use crate::client::handle::LockClient;
use crate::error::{bounded, LockError};
use crate::protocol::name::LockName;

impl LockClient {
    /// Asks Redis whether it answers, within the command timeout: for readiness probes.
    ///
    /// | topology | ready when |
    /// | --- | --- |
    /// | one server | it answers `PING` |
    /// | Sentinel | the master the Sentinels name now answers `PING` (looked up if needed) |
    /// | Cluster | every master answers `PING` (redis-rs sends it to all primaries) |
    /// | Redlock | a majority of the nodes answers `PING` (what a lock needs) |
    ///
    /// Also updates [`is_reachable`](Self::is_reachable) and its log lines.
    ///
    /// # Errors
    /// The outage ([`LockError::is_unavailable`]) or refusal (a wrong password, say), named
    /// after the lock `(ping)`.
    ///
    /// # Cancel safety
    /// Read-only: dropping the future changes nothing.
    pub async fn ping(&self) -> Result<(), LockError> {
        let engine = &self.engine;
        let name = LockName::from("(ping)");
        let timeout = engine.config.command_timeout;
        let pings = engine.nodes.iter().map(|conn| {
            let (mut conn, name) = (conn.clone(), &name);
            async move {
                let pong: Result<String, _> =
                    bounded(name, timeout, redis::cmd("PING").query_async(&mut conn)).await;
                pong.map(drop)
            }
        });
        let answers = join_all(pings).await;
        engine.health.observe(&answers);
        let ok = answers.iter().filter(|a| a.is_ok()).count();
        if ok >= engine.quorum() {
            return Ok(());
        }
        Err(answers
            .into_iter()
            .find_map(Result::err)
            .expect("fewer answers than a quorum means an error"))
    }

    /// False when the last calls of this client found Redis unreachable (every node of a
    /// Redlock client), until a call succeeds again: a cheap hint, without a round trip, for
    /// a health endpoint or for not waiting on Redis. [`ping`](Self::ping) asks Redis.
    pub fn is_reachable(&self) -> bool {
        self.engine.health.is_reachable()
    }
}
