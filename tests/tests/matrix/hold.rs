//! One face for every kind: a request and a hold, whether of one name, of `lock_all`, a
//! job's fire, an election's term or an idempotency key in flight.
//!
//! A setting a kind does not have panics naming it: the table lists those cells as not
//! applicable, so a cell that reaches one is a table out of step with the kinds.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use lock_core::election::{Election, Leadership};
use lock_core::idempotency::{Begin, Fingerprint, Idempotency, InFlight, Outcome};
use lock_core::job::{JobOutcome, JobRequest};
use lock_core::{LockClient, LockGuard, LockRequest, MultiLockGuard, MultiLockRequest, OnLost};
use redis::{FromRedisValue, Pipeline};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::job::JobHold;
use crate::refusal::Refusal;

/// A request of one name or of several, or of a fleet kind.
pub(crate) enum Req {
    One(LockRequest),
    All(MultiLockRequest),
    Job(JobRequest),
    Election(Election),
    Idempotency(IdemReq),
}

/// An idempotency key's request: its protocol's settings, and a fingerprint of its own.
pub(crate) struct IdemReq {
    client: LockClient,
    key: String,
    lease: Option<Duration>,
}

impl IdemReq {
    pub(crate) fn new(client: &LockClient, key: &str) -> Self {
        Self {
            client: client.clone(),
            key: key.to_owned(),
            lease: None,
        }
    }

    fn protocol(&self) -> Idempotency {
        let idempotency = self.client.idempotency(self.key.as_str());
        match self.lease {
            Some(lease) => idempotency.lease(lease),
            None => idempotency,
        }
    }

    fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.key)
    }
}

/// Panics for a setting `kind` does not have (see the module docs).
fn absent(setting: &str, kind: &str) -> ! {
    panic!("{kind} has no {setting}: the table lists this cell as not applicable")
}

/// Applies a setting that both lock requests have, then the fleet kinds' own arms.
macro_rules! locks {
    ($req:expr, |$r:ident| $body:expr, $($fleet:tt)*) => {
        match $req {
            Req::One($r) => Req::One($body),
            Req::All($r) => Req::All($body),
            $($fleet)*
        }
    };
}

impl Req {
    /// Waits up to `wait`; kinds without a wait keep theirs (a campaign waits without
    /// limit, `begin` never waits).
    pub(crate) fn wait(self, wait: Duration) -> Self {
        locks!(self, |r| r.wait(wait), Req::Job(j) => Req::Job(j.wait(wait)), other => other)
    }

    pub(crate) fn lease(self, lease: Duration) -> Self {
        locks!(self, |r| r.lease(lease),
            Req::Job(j) => Req::Job(j.hold_at_most(lease)),
            Req::Idempotency(i) => Req::Idempotency(IdemReq { lease: Some(lease), ..i }),
            Req::Election(_) => absent("explicit lease", "an election"),
        )
    }

    pub(crate) fn request_id(self, id: &str) -> Self {
        locks!(self, |r| r.request_id(id),
            Req::Job(j) => Req::Job(j.request_id(id)),
            _ => absent("request id", "this kind"),
        )
    }

    /// What happens to `run`'s work on loss; an idempotency key always aborts.
    pub(crate) fn on_lost(self, on_lost: OnLost) -> Self {
        locks!(self, |r| r.on_lost(on_lost),
            Req::Job(j) => Req::Job(j.on_lost(on_lost)),
            Req::Idempotency(i) if on_lost == OnLost::Abort => Req::Idempotency(i),
            _ => absent("such on-lost policy", "this kind"),
        )
    }

    /// The metrics label; kinds with their own label ([`Kind::fixed_label`]) keep it.
    ///
    /// [`Kind::fixed_label`]: crate::kind::Kind::fixed_label
    pub(crate) fn metrics_label(self, label: String) -> Self {
        let label: Cow<'static, str> = label.into();
        locks!(self, |r| r.metrics_label(label.clone()),
            Req::Job(j) => Req::Job(j.metrics_label(label)),
            other => other,
        )
    }

    /// Takes the hold; a job that was skipped or a key that replayed fails the cell.
    pub(crate) async fn acquire(self) -> Result<Hold, Refusal> {
        match self {
            Req::One(r) => Ok(Hold::One(r.acquire().await?)),
            Req::All(r) => Ok(Hold::All(r.acquire().await?)),
            Req::Job(j) => match JobHold::start(j).await? {
                Some(fire) => Ok(Hold::Job(fire)),
                None => panic!("the job was skipped: its name was held"),
            },
            Req::Election(e) => Ok(Hold::Leader(e.campaign().await?)),
            Req::Idempotency(i) => match i.protocol().begin(&i.fingerprint()).await? {
                Begin::Run(in_flight) => Ok(Hold::InFlight(in_flight)),
                Begin::Replay(_) => panic!("{}: replayed, not run", i.key),
            },
        }
    }

    /// One attempt: `None` when busy.
    pub(crate) async fn try_acquire(self) -> Result<Option<Hold>, Refusal> {
        match self {
            Req::One(r) => Ok(r.try_acquire().await?.map(Hold::One)),
            Req::All(r) => Ok(r.try_acquire().await?.map(Hold::All)),
            Req::Job(j) => Ok(JobHold::start(j.wait(Duration::ZERO)).await?.map(Hold::Job)),
            Req::Idempotency(i) => match i.protocol().begin(&i.fingerprint()).await {
                Ok(Begin::Run(in_flight)) => Ok(Some(Hold::InFlight(in_flight))),
                Ok(Begin::Replay(_)) => panic!("{}: replayed, not run", i.key),
                Err(busy) if busy.is_in_flight() => Ok(None),
                Err(error) => Err(error.into()),
            },
            Req::Election(_) => absent("single attempt", "an election"),
        }
    }

    /// Runs `work` under the hold: `Ran`, or for an idempotency key that completed,
    /// `Replayed` with the stored output.
    pub(crate) async fn run<F>(self, work: F) -> Result<Outcome<F::Output>, Refusal>
    where
        F: Future + Send + 'static,
        F::Output: Serialize + DeserializeOwned + Send + 'static,
    {
        match self {
            Req::One(r) => Ok(Outcome::Ran(r.run(work).await?)),
            Req::All(r) => Ok(Outcome::Ran(r.run(work).await?)),
            Req::Job(j) => match j.run(work).await? {
                JobOutcome::Ran(output) => Ok(Outcome::Ran(output)),
                JobOutcome::Skipped(_) => panic!("the job was skipped: its name was held"),
            },
            Req::Idempotency(i) => {
                let work = async move { Ok::<_, Refusal>(work.await) };
                let call = i.client.idempotent(i.key.as_str(), i.fingerprint(), work);
                match i.lease {
                    Some(lease) => call.lease(lease).await,
                    None => call.await,
                }
            }
            Req::Election(_) => absent("guarded run", "an election"),
        }
    }
}

/// A hold of any kind.
pub(crate) enum Hold {
    One(LockGuard),
    All(MultiLockGuard),
    Job(JobHold),
    Leader(Leadership),
    InFlight(InFlight),
}

impl Hold {
    pub(crate) fn is_held(&mut self) -> bool {
        match self {
            Hold::One(g) => g.is_held(),
            Hold::All(g) => g.is_held(),
            Hold::Job(fire) => fire.is_held(),
            Hold::Leader(term) => term.is_leader(),
            Hold::InFlight(f) => f.guard().is_held(),
        }
    }

    /// The fencing token of `name`.
    pub(crate) fn token(&self, name: &str) -> u64 {
        match self {
            Hold::One(g) => g.fencing_token(),
            Hold::All(g) => g.fencing_token(name).expect("one of the names"),
            Hold::Job(fire) => fire.token(),
            Hold::Leader(term) => term.fencing_token(),
            Hold::InFlight(f) => f.guard().fencing_token(),
        }
    }

    // `&mut`: a job's fire is `Send`, not `Sync`.
    pub(crate) async fn extend(&mut self, lease: Duration) -> Result<(), Refusal> {
        match self {
            Hold::One(g) => Ok(g.extend(lease).await?),
            Hold::All(g) => Ok(g.extend(lease).await?),
            Hold::InFlight(f) => Ok(f.guard().extend(lease).await?),
            Hold::Job(_) | Hold::Leader(_) => absent("extension", "a job or a term"),
        }
    }

    /// The key `suffix` beside the hold (in its slot): of the first name for `lock_all`.
    pub(crate) fn key(&self, suffix: &str) -> String {
        match self {
            Hold::One(g) => g.key(suffix),
            Hold::All(g) => g.guards()[0].key(suffix),
            Hold::Job(fire) => fire.info().key(suffix).expect("the body runs"),
            Hold::Leader(term) => term.guard().key(suffix),
            Hold::InFlight(f) => f.guard().key(suffix),
        }
    }

    /// A guarded write under the hold: through the guard, or a job body's current lock.
    pub(crate) async fn write<T: FromRedisValue>(
        &mut self,
        commands: &Pipeline,
    ) -> Result<T, Refusal> {
        let written = match self {
            Hold::One(g) => g.write(commands).await,
            Hold::All(g) => g.guards()[0].write(commands).await,
            Hold::Job(fire) => fire.info().write(commands).await,
            Hold::Leader(term) => term.guard().write(commands).await,
            Hold::InFlight(f) => f.guard().write(commands).await,
        };
        Ok(written?)
    }

    /// Resolves once the hold is known lost.
    pub(crate) async fn lost(&mut self) {
        match self {
            Hold::One(g) => g.lost().await,
            Hold::All(g) => {
                g.lost().await;
            }
            Hold::Job(fire) => fire.lost().await,
            Hold::Leader(term) => term.lost().await,
            Hold::InFlight(f) => f.lost().await,
        }
    }

    /// Ends the hold: releases it, ends the job's body, resigns, or frees the key without
    /// storing anything.
    pub(crate) async fn release(self) -> Result<(), Refusal> {
        match self {
            Hold::One(g) => Ok(g.release().await?),
            Hold::All(g) => Ok(g.release().await?),
            Hold::Job(fire) => Ok(fire.release().await?),
            Hold::Leader(term) => Ok(term.resign().await?),
            Hold::InFlight(f) => Ok(f.release().await?),
        }
    }
}
