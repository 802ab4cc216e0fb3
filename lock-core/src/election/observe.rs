//! The stream of an election's changes of leader: announcements on the election's channel
//! wake it, the read leader's lease bounds how long it trusts a read, and a pub/sub
//! reconnect (which wakes every listener of the client) makes it read again, so a missed
//! message delays a change by at most a lease and never hides it.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{self, BoxStream, Stream, StreamExt as _};
use tokio::time::Instant;

use crate::election::leader::{self, Leader};
use crate::error::LockError;
use crate::lock::engine::Engine;
use crate::lock::identity::next_owner_number;
use crate::observe;
use crate::protocol::name::{LockKeys, LockName};
use crate::transport::waiters::Subscription;

/// Pause after a failed read, doubled per failure up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(50);
const MAX_RETRY: Duration = Duration::from_secs(1);
/// Read again this long after the read leader's lease would run out: by then a live leader
/// has renewed it, a dead one's has ended.
const PAST_LEASE: Duration = Duration::from_millis(5);

/// The stream of [`Election::observe`](crate::election::Election::observe): yields who leads after
/// each change (`None`: nobody). Never ends; dropping it stops listening.
#[must_use = "streams do nothing unless polled"]
pub struct Observe {
    inner: BoxStream<'static, Option<Leader>>,
}

impl Observe {
    pub(crate) fn new(
        client: Arc<Engine>,
        name: LockName,
        keys: Result<LockKeys, LockError>,
    ) -> Self {
        let keys = match keys {
            Ok(keys) => keys,
            Err(error) => {
                let names = client.config.trace_names;
                tracing::error!(
                    distlock.error.class = error.class(),
                    error = observe::error(&error, names),
                    "cannot observe this election"
                );
                return Self {
                    inner: stream::pending().boxed(),
                };
            }
        };
        let owner = format!("{}:observe:{}", client.id, next_owner_number());
        let state = Watch {
            client,
            name,
            keys,
            owner,
            subscription: None,
            last: None,
            next_read: None,
            failures: 0,
        };
        Self {
            inner: stream::unfold(state, Watch::next_change).boxed(),
        }
    }
}

impl Stream for Observe {
    type Item = Option<Leader>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

impl fmt::Debug for Observe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observe").finish_non_exhaustive()
    }
}

/// What the stream keeps between changes.
struct Watch {
    client: Arc<Engine>,
    name: LockName,
    keys: LockKeys,
    /// The subscription's owner id (it is never granted anything).
    owner: String,
    subscription: Option<Subscription>,
    /// What was yielded last; `None` before the first item.
    last: Option<Option<Leader>>,
    /// When to read again unless a message comes first; `None`: now.
    next_read: Option<Instant>,
    failures: u32,
}

impl Watch {
    /// Waits for the next change and yields it.
    async fn next_change(mut self) -> Option<(Option<Leader>, Self)> {
        loop {
            if let (Some(at), Some(subscription)) = (self.next_read.take(), &mut self.subscription)
            {
                tokio::select! {
                    _ = subscription.next() => {}
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            if self.subscription.is_none() {
                // Subscribed before the first read: nothing announced after it is missed.
                let timeout = self.client.config.command_timeout;
                let waiters = &self.client.waiters;
                // The release channel only: an election's announcements travel there.
                let keys = &self.keys;
                self.subscription =
                    Some(waiters.subscribe(keys, &self.owner, timeout, false).await);
            }
            match leader::read(&self.client, &self.name, &self.keys).await {
                Ok(now) => {
                    self.failures = 0;
                    self.next_read = Some(self.read_again(now.as_ref()));
                    if self.is_change(now.as_ref()) {
                        self.last = Some(now.clone());
                        return Some((now, self));
                    }
                }
                Err(error) => {
                    let names = self.client.config.trace_names;
                    tracing::warn!(
                        distlock.lock.name = observe::name(&self.name, names),
                        distlock.error.class = error.class(),
                        error = observe::error(&error, names),
                        "reading the leader failed"
                    );
                    let pause = FIRST_RETRY * 2u32.saturating_pow(self.failures);
                    self.failures = self.failures.saturating_add(1);
                    self.next_read = Some(Instant::now() + pause.min(MAX_RETRY));
                }
            }
        }
    }

    /// When to read again without a message: past the leader's lease, or after the
    /// client's lease when nobody leads (a new leader announces itself).
    fn read_again(&self, leader: Option<&Leader>) -> Instant {
        let lease = self.client.config.lease;
        let wait = leader
            .and_then(Leader::remaining_ttl)
            .map_or(lease, |ttl| (ttl + PAST_LEASE).min(lease));
        Instant::now() + wait
    }

    fn is_change(&self, now: Option<&Leader>) -> bool {
        match (&self.last, now) {
            (None, _) => true,
            (Some(Some(last)), Some(now)) => !last.same_as(now),
            (Some(None), None) => false,
            (Some(_), _) => true,
        }
    }
}
