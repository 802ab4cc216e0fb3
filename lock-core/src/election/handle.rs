//! An election's handle: campaign for it, read who leads it, observe its terms.

use std::iter;

use crate::client::handle::LockClient;
use crate::election::leader::{self, Leader};
use crate::election::leadership::{proclaim, Leadership};
use crate::election::observe::Observe;
use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::scope::Scope;
use crate::observe;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::{LockKeys, LockName};

/// The metrics label of elections' holds.
const FAMILY: &str = "election";

/// A leader election on one name, made by [`LockClient::election`]: cheap to clone.
///
/// - [`campaign`](Self::campaign) waits until this instance leads and returns its
///   [`Leadership`]: the term's fencing token, renewed by the watchdog, with `lost()` and
///   `resign()`;
/// - [`leader`](Self::leader) reads who leads now (service, host, pid, value, since,
///   token);
/// - [`observe`](Self::observe) streams every change of leader.
///
/// Terms use the client's lease (see [`LockClientBuilder::lease`](crate::LockClientBuilder::lease)):
/// a follower takes over within that lease when the leader dies, and at once when it
/// resigns.
///
/// Elections need one Redis (a server, Sentinel or a Cluster): under Redlock no single
/// record names the leader, and every call answers [`LockError::InvalidRequest`].
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// let election = client.election("orders_consumer").value("10.0.0.7:8080");
/// let term = election.campaign().await?;
/// println!("leading, term {}", term.fencing_token());
/// tokio::select! {
///     () = term.lost() => println!("term over"),
///     () = async { /* consume, writing with term.fencing_token() */ } => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    client: LockClient,
    name: LockName,
    value: Option<String>,
}

impl LockClient {
    /// The leader election on the name `name` (see [`Election`](crate::election::Election)).
    pub fn election(&self, name: impl Into<LockName>) -> Election {
        Election::new(self.clone(), name.into())
    }
}

impl Election {
    /// Longest proclaimed value, in bytes.
    pub const MAX_VALUE: usize = 4096;

    pub(crate) fn new(client: LockClient, name: LockName) -> Self {
        Self {
            client,
            name,
            value: None,
        }
    }

    /// The value this instance proclaims when it leads (its address, say), which followers
    /// read in [`Leader::value`]. An empty value is none.
    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into()).filter(|v| !v.is_empty());
        self
    }

    /// The election's name.
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// Waits until this instance leads, without limit, and returns its term. Waiting
    /// followers queue for the name: a resignation hands it to the next at once, a dead
    /// leader's term ends with its lease.
    ///
    /// # Errors
    /// [`LockError::InvalidRequest`] under Redlock, for a value above
    /// [`MAX_VALUE`](Self::MAX_VALUE) bytes, or when this task's reentrancy scope already
    /// leads this election (a second campaign would re-enter the term, not wait for one);
    /// [`LockError::InvalidName`]; the Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future leaves no term held (as [`LockRequest::acquire`](crate::LockRequest::acquire)).
    pub async fn campaign(&self) -> Result<Leadership, LockError> {
        let keys = self.keys()?;
        check_value(&self.name, self.value.as_deref())?;
        let in_scope = Scope::current()
            .is_some_and(|scope| scope.holds_any(&self.client.engine.id, iter::once(keys.lock())));
        if in_scope {
            return Err(self.invalid(
                "this task's reentrancy scope already leads this election: campaign from \
                 another task",
            ));
        }
        loop {
            let request = self.client.lock(self.name.clone());
            let guard = request
                .wait_forever()
                .metrics_label(FAMILY)
                .acquire()
                .await?;
            match proclaim(&guard, self.value.as_deref()).await {
                Ok(()) => return Ok(Leadership::new(guard, self.value.clone())),
                // The term ended before it was announced: campaign again.
                Err(LockError::Lost { .. }) => {
                    let names = self.client.engine.config.trace_names;
                    tracing::debug!(
                        distlock.lock.template = FAMILY,
                        distlock.lock.name = observe::name(&self.name, names),
                        "term over at once"
                    );
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Who leads now, or `None`.
    ///
    /// # Errors
    /// [`LockError::InvalidRequest`] under Redlock; [`LockError::InvalidName`]; the Redis
    /// errors.
    pub async fn leader(&self) -> Result<Option<Leader>, LockError> {
        let keys = self.keys()?;
        leader::read(&self.client.engine, &self.name, &keys).await
    }

    /// Every change of leader, as a [`Stream`](futures_util::Stream): first who leads now,
    /// then each new term (`Some`) or vacancy (`None`), and each new proclaimed value.
    ///
    /// It is driven by the announcements on the election's channel and by the term's
    /// lease: it reads the leader again on every message, when the read leader's lease
    /// would run out, and after its pub/sub connection came back, so a missed message never
    /// hides a change for longer than a lease. Terms that began and ended entirely while it
    /// could not reach Redis are not seen (the next token is then higher by more). Read
    /// failures are logged and retried; the stream never ends.
    ///
    /// Under Redlock (or for an invalid name) it yields nothing and logs the error.
    pub fn observe(&self) -> Observe {
        Observe::new(
            std::sync::Arc::clone(&self.client.engine),
            self.name.clone(),
            self.keys(),
        )
    }

    /// The keys of the election: one Redis only.
    fn keys(&self) -> Result<LockKeys, LockError> {
        let engine: &Engine = &self.client.engine;
        if engine.nodes.len() > 1 {
            return Err(self.invalid(
                "elections need one Redis (a server, Sentinel or a Cluster): under Redlock \
                 no single record names the leader",
            ));
        }
        engine.keys(&self.name, LockMode::Exclusive)
    }

    fn invalid(&self, reason: &str) -> LockError {
        LockError::InvalidRequest {
            name: self.name.clone(),
            reason: reason.to_owned(),
        }
    }
}

/// Refuses a value above [`Election::MAX_VALUE`] bytes.
pub(crate) fn check_value(name: &LockName, value: Option<&str>) -> Result<(), LockError> {
    match value {
        Some(v) if v.len() > Election::MAX_VALUE => Err(LockError::InvalidRequest {
            name: name.clone(),
            reason: format!(
                "a proclaimed value of {} bytes is longer than the limit of {} bytes",
                v.len(),
                Election::MAX_VALUE
            ),
        }),
        _ => Ok(()),
    }
}
