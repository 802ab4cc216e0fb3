//! Is Redis reachable? The engine's view from every call it makes, logged once per outage,
//! not per request.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::LockError;

/// While Redis stays unreachable, the warning is repeated at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the calls of one client have shown about Redis.
#[derive(Debug, Default)]
pub(crate) struct Health {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Since when every call failed as an outage; `None` while Redis answers.
    down_since: Option<Instant>,
    last_warning: Option<Instant>,
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
        let Some(since) = self.state().down_since.take() else {
            return;
        };
        tracing::info!(down_for = ?since.elapsed(), "redis is reachable again");
    }

    fn down(&self, error: &LockError) {
        let now = Instant::now();
        let mut state = self.state();
        let since = *state.down_since.get_or_insert(now);
        if state.last_warning.is_some_and(|at| now < at + WARN_EVERY) && since != now {
            return;
        }
        state.last_warning = Some(now);
        drop(state);
        tracing::warn!(lock = error.name().map(tracing::field::display), %error, down_for = ?now - since,
            "redis cannot be reached: lock requests fail until it is back");
    }

    /// False once a call failed as an outage, until one succeeds.
    pub(crate) fn is_reachable(&self) -> bool {
        self.state().down_since.is_none()
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
}
