//! Taking a lock: re-entry, the acquire function, and waiting in the fair queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::LockError;
use crate::lock::claim;
use crate::lock::config::check_request_lease;
use crate::lock::engine::Engine;
use crate::lock::guard::LockGuard;
use crate::lock::held::{Acquired, Held};
use crate::lock::hold_registry::HoldRegistry;
use crate::lock::identity::{next_owner_number, owner_id, HoldIdentity};
use crate::lock::options::RequestOptions;
use crate::lock::pending::{leave, Pending};
use crate::lock::quorum::AcquireTally;
use crate::lock::replicas::replicated;
use crate::lock::scope::Scope;
use crate::lock::time::{drift, later};
use crate::observe::{observe, Event, Subject};
use crate::protocol::holder::HolderInfo;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::kind::WAITER_TTL_MS;
use crate::protocol::lock_calls;
use crate::protocol::name::LockName;
use crate::protocol::replies::AcquireReply;
use crate::transport::waiters::{Subscription, Wake};

/// Pause before retrying a lock that has no TTL (set by someone else without expiry).
const NO_TTL_RETRY: Duration = Duration::from_millis(100);
/// A queued waiter that has not refreshed its place for this long is skipped as dead.
const WAITER_TTL: Duration = Duration::from_millis(WAITER_TTL_MS);
/// Longest sleep of a waiter between attempts; each attempt refreshes its place. A claim
/// long: a hand-off to a waiter that died with its grant unread is found by the next live
/// waiter's retry within a claim of the release, as a claim runs out (no message tells).
const WAITER_REFRESH: Duration = claim::CLAIM;

/// Longest random pause between Redlock attempts (spreads competing clients apart).
const REDLOCK_RETRY: Duration = Duration::from_millis(50);

/// A random duration below `max`, from the CSPRNG behind UUIDs.
fn random_delay(max: Duration) -> Duration {
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_micros(random % max.as_micros().max(1) as u64)
}

/// A hold taken: its token, and the TTL Redis set for it at a moment no earlier than the
/// local `sent_at` (the lease, or a hand-off's claim — extended at `extend_at`).
struct Taken {
    token: u64,
    sent_at: Instant,
    ttl: Duration,
    extend_at: Option<Instant>,
}

/// What one attempt found.
enum Attempt {
    Acquired(u64),
    /// Held by another owner (or promised to an earlier waiter), with its TTL if any, the
    /// holder's record if it has one, and the holder's fencing token.
    Busy(Option<Duration>, Option<Box<HolderInfo>>, u64),
}

/// Takes a hold of `name` of `kind` (`permits`: a semaphore's capacity as the caller sees
/// it, 1 for the other kinds) through `engine`, registered in `holds`: re-entered from the
/// caller's scope, or acquired in Redis — at once, or after waiting in the fair queue.
pub(crate) async fn acquire(
    engine: Arc<Engine>,
    holds: Arc<HoldRegistry>,
    name: LockName,
    kind: LockMode,
    permits: u32,
    options: RequestOptions,
) -> Result<LockGuard, LockError> {
    let watchdog = options.watchdog();
    let lease = options.lease_on(&engine);
    if holds.is_closed() {
        return Err(LockError::ShutDown { name });
    }
    check_request_lease(&name, lease)?;
    check_kind(&engine, &name, kind, permits)?;
    engine.health.admit(&name)?;
    let keys = engine.keys(&name, kind)?;
    let scope = Scope::current();
    if let Some(held) = scope
        .as_ref()
        .and_then(|s| s.reenter(&engine.id, keys.lock()))
    {
        return reentered(held, scope, kind);
    }
    let label = options.label;
    let started = Instant::now();
    // Known without a round trip but when the client has yet to learn its masters' replicas
    // (at connect time, after a topology change): boxed, a rare path.
    let replica_ack = match engine.replica_ack_known(keys.lock()) {
        Some(ack) => ack,
        None => match Box::pin(engine.replica_ack(&name, keys.lock())).await {
            Ok(ack) => ack,
            Err(error) => {
                let ended = Event::AcquisitionEnded {
                    result: Err(&error),
                    waited: started.elapsed(),
                    contended: false,
                };
                let traced = engine.config.trace_names;
                observe(Subject::new(&label, &name, traced, None), ended);
                return Err(error);
            }
        },
    };
    let identity = HoldIdentity {
        owner: owner_id(&engine.id, next_owner_number(), kind),
        keys,
        capacity: permits,
        lease,
        meta: engine.holder_meta(options.request_id.as_deref()),
        label: label.clone(),
    };
    let attempter = Attempter {
        engine: &engine,
        holds: &holds,
        name: &name,
        identity,
        contended: AtomicBool::new(false),
        ended: CancellationToken::new(),
    };
    let taken = attempter.wait_for_lock(options.wait).await;
    let contended = attempter.contended.load(Ordering::Relaxed);
    let result = match taken {
        Ok(Taken {
            token,
            sent_at,
            ttl,
            extend_at,
        }) => {
            // Taken out first: the attempter borrows `name`.
            let (identity, ended) = (attempter.identity, attempter.ended);
            let acquired = Acquired {
                name,
                identity,
                token,
                watchdog,
                sent_at,
                ttl,
                extend_at,
                trace_parent: options.trace_parent,
                ended,
            };
            // The guard exists before the next `.await`: dropped from here on, it releases.
            let guard = LockGuard::granted(&engine, &holds, acquired, scope);
            if holds.is_closed() {
                // Granted while the client shut down: the hold was given back.
                return Err(LockError::ShutDown {
                    name: guard.name().clone(),
                });
            }
            match replica_ack {
                // Boxed: kept out of every acquisition's future where no replica is waited for.
                Some((replicas, timeout)) => Box::pin(replicated(guard, replicas, timeout)).await,
                None => Ok(guard),
            }
        }
        Err(error) => Err(error),
    };
    let ended = Event::AcquisitionEnded {
        result: result.as_ref().map(|_| ()),
        waited: started.elapsed(),
        contended,
    };
    let name = result
        .as_ref()
        .map_or_else(LockError::name, |guard| Some(guard.name()));
    let names = engine.config.trace_names;
    observe(Subject::new(&label, name, names, None), ended);
    result
}

/// Refuses what a kind cannot do: a semaphore without permits, and the shared kinds under
/// Redlock (a reader set or a permit count cannot be voted on node by node).
fn check_kind(
    engine: &Engine,
    name: &LockName,
    kind: LockMode,
    permits: u32,
) -> Result<(), LockError> {
    match kind.unsupported(permits, engine.nodes.len()) {
        None => Ok(()),
        Some(reason) => Err(LockError::InvalidRequest {
            name: name.clone(),
            reason,
        }),
    }
}

fn reentered(
    held: Arc<Held>,
    scope: Option<Arc<Scope>>,
    wanted: LockMode,
) -> Result<LockGuard, LockError> {
    let held_kind = held.identity.keys.mode();
    let guard = LockGuard::reentered(held, scope);
    if !held_kind.covers(wanted) {
        // Dropping the guard gives the hold back.
        return Err(LockError::InvalidRequest {
            name: guard.name().clone(),
            reason: held_kind.refusal(wanted),
        });
    }
    if !guard.is_held() {
        // Dropping the guard gives the hold back; the caller learns the lock is gone.
        return Err(guard.lost_error());
    }
    let held = guard.held();
    let names = held.engine.config.trace_names;
    observe(
        Subject::new(&held.identity.label, &held.name, names, None),
        Event::Reentered,
    );
    Ok(guard)
}

/// One acquisition's attempts: what they send, and what the clean-up guard needs.
struct Attempter<'a> {
    engine: &'a Arc<Engine>,
    /// The client's holds, with its queued waits and its shutdown signal.
    holds: &'a HoldRegistry,
    name: &'a LockName,
    /// Who the attempts acquire for; the hold's once granted.
    identity: HoldIdentity,
    /// Set when an attempt found the lock busy.
    contended: AtomicBool,
    /// The hold's end signal, once granted (see [`Self::undo_late_grant`]).
    ended: CancellationToken,
}

impl Attempter<'_> {
    /// Tries until acquired or the wait is over.
    async fn wait_for_lock(&self, wait: Option<Duration>) -> Result<Taken, LockError> {
        let started = Instant::now();
        let deadline = wait.map(|w| later(started, w));
        // Redlock nodes would each queue and grant on their own: there, waiters retry instead
        // (and listen for releases only: no grant comes).
        let redlock = self.engine.nodes.len() > 1;
        let waiter_ttl = if wait == Some(Duration::ZERO) || redlock {
            Duration::ZERO
        } else {
            WAITER_TTL
        };
        // Until disarmed, dropping this leaves the queue or undoes an unseen acquisition.
        let pending = Pending::new(self.engine, &self.identity);
        // Another waiter of this client already listens on the channel: join it before the
        // first attempt, so that a busy answer needs no retry after subscribing.
        let mut subscription: Option<Subscription> = match wait {
            Some(Duration::ZERO) => None,
            _ => {
                (self.engine.waiters).join_live(&self.identity.keys, &self.identity.owner, !redlock)
            }
        };
        let mut woken = None;
        // A grant whose token is not above a holder's token seen since was superseded (it
        // expired while this waiter was paused, say): its message must not be trusted.
        let mut superseded_below = 0;
        // Recorded while queued, for a shutdown to take out of the queue.
        let mut entry = None;
        for attempts in 1u64.. {
            self.observe(Event::Attempt { attempts });
            if self.holds.is_closed() {
                if entry.is_some() || redlock {
                    pending.leave().await;
                } else {
                    pending.disarm();
                }
                return Err(LockError::ShutDown {
                    name: self.name.clone(),
                });
            }
            let sent_at = Instant::now();
            // Queued only once subscribed: Redis skips a queued waiter whose client does not
            // hear its grant (see `library/queue.lua`), and the first attempt of a client not yet
            // listening on this lock comes before its subscription.
            let queue_for = if subscription.is_some() {
                waiter_ttl
            } else {
                Duration::ZERO
            };
            if entry.is_none() && !queue_for.is_zero() {
                entry = Some(self.holds.queued.enter(self.identity.clone()));
            }
            let (ttl, holder) = match self.try_once(queue_for).await? {
                Attempt::Acquired(token) => {
                    pending.disarm();
                    self.trace_acquired(token, started, attempts, woken);
                    return Ok(Taken {
                        token,
                        sent_at,
                        ttl: self.identity.lease,
                        extend_at: None,
                    });
                }
                Attempt::Busy(ttl, holder, fence) => {
                    self.contended.store(true, Ordering::Relaxed);
                    superseded_below = superseded_below.max(fence);
                    (ttl, holder)
                }
            };
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                self.observe(Event::GaveUp {
                    waited: started.elapsed(),
                    attempts,
                    holder_ttl: ttl,
                });
                // A busy answer that was not queued left nothing on one node: no clean-up
                // round trip. (Under Redlock a minority of nodes may have granted: undone.)
                if queue_for.is_zero() && !redlock {
                    pending.disarm();
                } else {
                    pending.leave().await;
                }
                return Err(LockError::WaitTimeout {
                    name: self.name.clone(),
                    waited: started.elapsed(),
                    remaining_ttl: ttl,
                    holder,
                });
            }
            let Some(sub) = subscription.as_mut() else {
                // Subscribe, then retry at once: a release before the subscription is not lost.
                let timeout = self.engine.config.command_timeout;
                let waiters = &self.engine.waiters;
                let joined =
                    waiters.subscribe(&self.identity.keys, &self.identity.owner, timeout, !redlock);
                subscription = Some(joined.await);
                continue;
            };
            // Redlock: a fresh random pause each time, so competing clients that split the
            // votes once do not collide again in step.
            let refresh = if redlock {
                random_delay(REDLOCK_RETRY)
            } else {
                WAITER_REFRESH.min(self.identity.lease / 3)
            };
            let retry_at = now + ttl.unwrap_or(NO_TTL_RETRY).min(refresh);
            let retry_at = deadline.map_or(retry_at, |d| retry_at.min(d));
            // Only a timer set for the holder's lease wakes "by TTL": the periodic refresh
            // and the end of the wait are no evidence of a missed release message.
            let lease_timer = ttl.is_some_and(|ttl| now + ttl <= retry_at);
            let wake = tokio::select! {
                wake = sub.next() => Some(wake),
                () = tokio::time::sleep_until(retry_at) => None,
                // The next turn of the loop leaves the queue and ends.
                () = self.holds.closing() => None,
            };
            if let Some(Wake::Granted(token)) =
                wake.filter(|w| !is_superseded(*w, superseded_below))
            {
                self.observe(Event::Woken { by: "message" });
                if let Some(taken) = self.take_grant(token, sent_at).await? {
                    pending.disarm();
                    self.trace_acquired(token, started, attempts, Some("grant"));
                    return Ok(taken);
                }
                // The claim ran out before this waiter read its grant: wait on.
                self.observe(Event::GrantMissed);
                sub.rearm_grant();
                continue;
            }
            if wake.is_some_and(|w| is_superseded(w, superseded_below)) {
                // Read after a later holder was seen: its claim ran out unread.
                self.observe(Event::GrantSuperseded);
                sub.rearm_grant();
            }
            let by = match (wake, lease_timer) {
                (Some(_), _) => Some("message"),
                (None, true) => Some("ttl"),
                (None, false) => None,
            };
            if let Some(by) = by {
                self.observe(Event::Woken { by });
                woken = Some(by);
            }
        }
        unreachable!("the attempt counter does not run out")
    }

    /// Takes a grant by message: a claim counted from `sent_at`, our last attempt (the grant
    /// came after it reached Redis). With half of it left locally, taken at once and
    /// extended later; else extended first (see [`claim`](crate::lock::claim)). `None` when
    /// the claim ran out before it could be extended.
    async fn take_grant(&self, token: u64, sent_at: Instant) -> Result<Option<Taken>, LockError> {
        if self.identity.lease <= claim::CLAIM {
            // The claim is the whole lease: nothing to extend.
            return Ok(Some(Taken {
                token,
                sent_at,
                ttl: self.identity.lease,
                extend_at: None,
            }));
        }
        if let Some(at) = claim::extend_at(sent_at, self.identity.lease) {
            return Ok(Some(Taken {
                token,
                sent_at,
                ttl: claim::claim_of(self.identity.lease),
                extend_at: Some(at),
            }));
        }
        let extended = claim::extend_now(self.engine, self.name, &self.identity);
        Ok(extended.await?.map(|(ttl, sent_at)| Taken {
            token,
            sent_at,
            ttl,
            extend_at: None,
        }))
    }

    /// Redlock: raises the fence floor of every node to `token` for a lease, and succeeds
    /// once a majority did. Any later majority within the lease shares a node with that one,
    /// so its token is greater (after it, the nodes' clocks have moved on). Without a raised
    /// majority a later token could be lower, so the caller must not hand this one out. One
    /// server: nothing to do.
    async fn raise_fences(&self, token: u64) -> Result<(), LockError> {
        if self.engine.nodes.len() == 1 {
            return Ok(());
        }
        let call = lock_calls::fence_floor(&self.identity.keys, token, self.identity.lease);
        let quorum = self.engine.quorum();
        let raised = |answers: &[Result<i64, LockError>]| {
            answers.iter().filter(|a| a.is_ok()).count() >= quorum
        };
        let answers = self
            .engine
            .call_until(self.name, self.identity.lease, call, raised)
            .await;
        if raised(&answers) {
            return Ok(());
        }
        let mut errors = answers.into_iter().filter_map(Result::err);
        Err(errors.next().unwrap_or_else(|| LockError::Timeout {
            name: self.name.clone(),
            after: self.identity.lease,
        }))
    }

    /// True while an attempt sent at `sent_at` still leaves some of the lease: Redlock's
    /// validity, lease − elapsed − drift.
    fn still_valid(&self, sent_at: Instant) -> bool {
        sent_at.elapsed() + drift(self.identity.lease) < self.identity.lease
    }

    /// Leaves the queue, and undoes a grant this attempter did not keep.
    async fn leave(&self) {
        leave(self.engine, &self.identity).await;
    }

    fn trace_acquired(
        &self,
        token: u64,
        started: Instant,
        attempts: u64,
        woken: Option<&'static str>,
    ) {
        self.observe(Event::Acquired {
            owner: &self.identity.owner,
            token,
            waited: started.elapsed(),
            attempts,
            woken,
        });
    }

    /// Observes `event` of this acquisition, inside its span.
    fn observe(&self, event: Event<'_>) {
        let names = self.engine.config.trace_names;
        observe(
            Subject::new(&self.identity.label, self.name, names, None),
            event,
        );
    }

    /// What a node's grant that answers after the attempt was decided (under Redlock) gets: a
    /// release on that node, when the hold has ended by then. Such a call can reach its node
    /// after the hold's own release did (a call that meets the library missing is sent again
    /// after the load, behind whatever was sent meanwhile); undone, it does not hold that
    /// node for a lease. While the hold lasts nothing is needed: its release, sent later,
    /// runs after the grant it answered. Owners are never reused, so the release can only
    /// end this acquisition's hold.
    fn undo_late_grant(
        &self,
    ) -> impl FnMut(usize, Result<AcquireReply, LockError>) -> Option<BoxFuture<'static, ()>>
           + Send
           + 'static {
        let (engine, ended, name) = (
            Arc::clone(self.engine),
            self.ended.clone(),
            self.name.clone(),
        );
        let undo = Arc::new(self.identity.release_call(engine.config.publish, false));
        let lease = self.identity.lease;
        move |node, answer| {
            let granted = matches!(answer, Ok(AcquireReply::Acquired { .. }));
            if !granted || !ended.is_cancelled() {
                return None;
            }
            let (engine, undo, name) = (Arc::clone(&engine), Arc::clone(&undo), name.clone());
            Some(Box::pin(async move {
                let _ = engine.call_node(node, &name, lease, &undo).await;
            }))
        }
    }

    /// One call of the acquire function on every node (idempotent: a retry after a lost reply
    /// is safe). Held when a quorum granted it with validity left; a minority grant is undone.
    async fn try_once(&self, waiter_ttl: Duration) -> Result<Attempt, LockError> {
        let started = Instant::now();
        let publish = self.engine.config.publish;
        let HoldIdentity {
            keys,
            owner,
            capacity,
            lease,
            meta,
            ..
        } = &self.identity;
        let call = lock_calls::acquire(keys, owner, *lease, waiter_ttl, meta, publish, *capacity);
        // A granting quorum settles it; any other outcome waits for every node, so that a
        // minority grant is known and undone below (one left unseen on a slow node would
        // block that node for a whole lease).
        let quorum = self.engine.quorum();
        let granted = |answers: &[Result<AcquireReply, LockError>]| {
            let acquired = answers
                .iter()
                .filter(|a| matches!(a, Ok(AcquireReply::Acquired { .. })));
            acquired.count() >= quorum
        };
        let (engine, lease) = (self.engine, self.identity.lease);
        // Only Redlock has calls that answer after the decision (and one server no clean-up
        // to build on every attempt).
        let answers = if engine.nodes.len() > 1 {
            let late = self.undo_late_grant();
            (engine.call_until_then(self.name, lease, call, granted, late)).await
        } else {
            engine.call_until(self.name, lease, call, granted).await
        };
        let tally = AcquireTally::of(answers);
        if tally.acquired >= quorum && self.still_valid(started) {
            match self.raise_fences(tally.token).await {
                Ok(()) if self.still_valid(started) => return Ok(Attempt::Acquired(tally.token)),
                Err(error) => {
                    self.leave().await;
                    return Err(error);
                }
                // Raising the fences ate the validity: undone below, as a late quorum is.
                Ok(()) => {}
            }
        }
        if tally.acquired > 0 {
            self.leave().await;
        }
        if tally.busy == 0 && tally.acquired < quorum {
            if let Some(error) = tally.first_error {
                return Err(error);
            }
        }
        let ttl = if tally.no_ttl {
            None
        } else {
            Some(tally.busy_ttl.unwrap_or(Duration::ZERO))
        };
        Ok(Attempt::Busy(ttl, tally.holder, tally.fence))
    }
}

/// True for a grant that a later busy answer proved stale.
fn is_superseded(wake: Wake, superseded_below: u64) -> bool {
    matches!(wake, Wake::Granted(token) if token <= superseded_below)
}
