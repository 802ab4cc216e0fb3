//! Is Redis reachable? The engine's view from every call it makes, logged once per outage,
//! not per request. While it knows Redis is down, the engine refuses every call that starts
//! something (an acquisition, a read, an operator's tool, a guarded write) at once — a
//! circuit breaker — letting one through now and then as a probe. Calls that end or keep a
//! hold (releases, queue leaves, renewals, completions) always go: they are probes too.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::LockError;
use crate::observe;
use crate::protocol::name::LockName;

/// While Redis stays unreachable, the warning is repeated at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// Redis is known to be down once every call failed for this long, with no answer between
/// (one failed call is no outage: a slow answer on a busy machine, a Redlock node's 50 ms).
/// Then one call in this long after the last failure goes to Redis as a probe (so does
/// every `ping()`, release and renewal); the others fail at once instead of each waiting
/// its timeout.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What the calls of one client have shown about Redis.
#[derive(Debug, Default)]
pub(crate) struct Health {
    state: Mutex<State>,
    /// True when the client opted in to lock names in its log events.
    names: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Since when every call failed as an outage; `None` while Redis answers.
    down_since: Option<Instant>,
    last_warning: Option<Instant>,
    /// While down: when the next acquisition may try Redis (a second after the last failure).
    next_probe: Option<Instant>,
}

impl Health {
    /// The health of a client that names locks in its log events when `names`.
    pub(crate) fn new(names: bool) -> Self {
        Self {
            state: Mutex::default(),
            names,
        }
    }
}

impl State {
    /// True while Redis is known down (every call failed for [`PROBE_EVERY`]) and no probe
    /// is due.
    fn refuses(&self, now: Instant) -> bool {
        self.down_since.is_some_and(|since| {
            now >= since + PROBE_EVERY && self.next_probe.is_some_and(|at| now < at)
        })
    }
}

/// The error of a call refused without a round trip: the same outage as the calls that
/// failed, named after `name`.
fn refused(name: &LockName) -> LockError {
    LockError::Unavailable {
        name: name.clone(),
        source: redis::RedisError::from((
            redis::ErrorKind::Io,
            "redis did not answer this client's last calls: refused at once until a probe reaches it",
        )),
    }
}

impl Health {
    /// Takes in the answers of one call to every node: reachable when any node answered
    /// (a refusal is an answer too), unreachable when all failed as an outage.
    pub(crate) fn observe<T>(&self, answers: &[Result<T, LockError>]) {
        let answered =
            |a: &Result<T, LockError>| a.as_ref().map_or_else(|e| !e.is_unavailable(), |_| true);
        if answers.iter().any(answered) {
            self.up();
        } else if let Some(Err(error)) = answers.first() {
            self.down(error);
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn up(&self) {
        let mut state = self.state();
        state.next_probe = None;
        let Some(since) = state.down_since.take() else {
            return;
        };
        drop(state);
        tracing::info!(down_for = ?since.elapsed(), "redis is reachable again");
    }

    fn down(&self, error: &LockError) {
        let now = Instant::now();
        let mut state = self.state();
        let since = *state.down_since.get_or_insert(now);
        state.next_probe = Some(now + PROBE_EVERY);
        if state.last_warning.is_some_and(|at| now < at + WARN_EVERY) && since != now {
            return;
        }
        state.last_warning = Some(now);
        drop(state);
        let name = error
            .name()
            .and_then(|name| observe::name(name, self.names));
        tracing::warn!(distlock.lock.name = name, distlock.error.class = error.class(),
            error = observe::error(error, self.names), down_for = ?now - since,
            "redis cannot be reached: lock requests fail until it is back");
    }

    /// False once a call failed as an outage, until one succeeds.
    pub(crate) fn is_reachable(&self) -> bool {
        self.state().down_since.is_none()
    }

    /// Lets a call about `name` go to Redis: always, unless Redis is known to be down
    /// (every call failed for [`PROBE_EVERY`]); then only one a [`PROBE_EVERY`] after the
    /// last failure (whose answer shows whether it is back). The engine's gate, before every
    /// call that starts something.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] at once for the others: each would wait its timeout for
    /// the same outage.
    pub(crate) fn gate(&self, name: &LockName) -> Result<(), LockError> {
        let now = Instant::now();
        let mut state = self.state();
        if state.refuses(now) {
            return Err(refused(name));
        }
        if state.down_since.is_some() {
            state.next_probe = Some(now + PROBE_EVERY);
        }
        Ok(())
    }

    /// Refuses an acquisition of `name` before it queues or subscribes, as the engine's
    /// [`gate`](Self::gate) would refuse its first call; takes no probe (that call does).
    ///
    /// # Errors
    /// [`LockError::Unavailable`] while Redis is known down and no probe is due.
    pub(crate) fn admit(&self, name: &LockName) -> Result<(), LockError> {
        if self.state().refuses(Instant::now()) {
            return Err(refused(name));
        }
        Ok(())
    }

    /// Logs a failed call about a lock (`what` happened): a warning, or a debug line when it
    /// is the outage this client knows of, whose one warning was logged by [`Self::observe`].
    pub(crate) fn log_failure(&self, error: &LockError, what: &str) {
        let name = error
            .name()
            .and_then(|name| observe::name(name, self.names));
        let (class, error_text) = (error.class(), observe::error(error, self.names));
        if error.is_unavailable() && !self.is_reachable() {
            tracing::debug!(
                distlock.lock.name = name,
                distlock.error.class = class,
                error = error_text,
                "{what}"
            );
        } else {
            tracing::warn!(
                distlock.lock.name = name,
                distlock.error.class = class,
                error = error_text,
                "{what}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage() -> Result<(), LockError> {
        Err(LockError::Timeout {
            name: "x".into(),
            after: Duration::from_secs(1),
        })
    }

    #[test]
    fn one_answer_is_reachable_all_outages_are_not() {
        let health = Health::default();
        health.observe(&[outage(), outage()]);
        assert!(!health.is_reachable());
        health.observe(&[outage(), Ok(())]);
        assert!(health.is_reachable());
        health.observe::<()>(&[]);
        assert!(health.is_reachable());
    }

    #[test]
    fn while_down_one_call_a_second_goes_to_redis() {
        let (health, name) = (Health::default(), LockName::from("x"));
        health.gate(&name).unwrap();
        health.observe(&[outage()]);
        health
            .gate(&name)
            .expect("one failed call is no known outage");
        health.observe(&[outage()]);
        health.state().down_since = Some(Instant::now() - PROBE_EVERY);
        let refused = health.gate(&name).unwrap_err();
        assert!(refused.is_unavailable(), "{refused}");
        health.state().next_probe = Some(Instant::now());
        health.gate(&name).expect("a probe is due");
        assert!(health.gate(&name).is_err(), "one probe at a time");
        health.observe::<()>(&[Ok(())]);
        health.gate(&name).expect("redis answers again");
    }

    /// An acquisition is admitted, then its first call passes the gate: admitting takes no
    /// probe, else a due probe would be refused at the gate and never reach Redis.
    #[test]
    fn admitting_leaves_the_probe_to_the_call() {
        let (health, name) = (Health::default(), LockName::from("x"));
        health.observe(&[outage()]);
        health.state().down_since = Some(Instant::now() - PROBE_EVERY);
        assert!(health.admit(&name).is_err(), "known down, no probe due");
        health.state().next_probe = Some(Instant::now());
        health.admit(&name).expect("a probe is due");
        health
            .gate(&name)
            .expect("the admitted acquisition's call is the probe");
        assert!(health.admit(&name).is_err(), "the probe is taken");
    }
}
