//! A scheduled job's request: ShedLock's `@SchedulerLock(name, lockAtMostFor,
//! lockAtLeastFor)` on distlock's lock.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::handle::LockClient;
use crate::error::LockError;
use crate::job::linger::Lingering;
use crate::job::outcome::{JobOutcome, Skipped};
use crate::lock::guarded_run::{GuardedRun, OnLost};
use crate::lock::request::LockRequest;
use crate::lock::scope::scope;
use crate::lock::time::later;
use crate::observe;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;

/// One fire of a job that must run on one instance of the fleet: made by
/// [`LockClient::job`]. [`run`](Self::run) runs the body when the name is free and answers
/// [`JobOutcome::Skipped`] at once when another instance holds it.
///
/// - [`hold_at_most`](Self::hold_at_most) is the lease, with no watchdog: a dead instance's
///   hold ends by itself that long after it began (ShedLock's `lockAtMostFor`). Without
///   it the watchdog renews the hold while the body runs, as for any lock.
/// - [`hold_at_least`](Self::hold_at_least) keeps the name held until that long after the
///   job *started*, even when the body finished earlier or failed (ShedLock's
///   `lockAtLeastFor`): an instance whose clock or schedule is behind by less than that
///   finds the fire taken, instead of running it again.
///
/// ```no_run
/// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// use lock_core::job::JobOutcome;
///
/// let fire = client
///     .job("nightly_report")
///     .hold_at_least(Duration::from_secs(5 * 60))
///     .hold_at_most(Duration::from_secs(3600))
///     .run(async { 42 })
///     .await?;
/// match fire {
///     JobOutcome::Ran(rows) => println!("ran here: {rows} rows"),
///     JobOutcome::Skipped(skip) => println!("another instance has it: {:?}", skip.holder()),
/// }
/// # Ok(()) }
/// ```
#[must_use = "a job request does nothing until run"]
pub struct JobRequest {
    request: LockRequest,
    hold_at_least: Option<Duration>,
    on_lost: OnLost,
}

impl LockClient {
    /// Starts a scheduled job's fire on the name `name`: run once across the fleet,
    /// skipped where the name is held (see [`JobRequest`](crate::job::JobRequest)).
    pub fn job(&self, name: impl Into<LockName>) -> JobRequest {
        JobRequest::new(self.clone(), name.into())
    }
}

impl fmt::Debug for JobRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRequest")
            .field("request", &self.request)
            .field("hold_at_least", &self.hold_at_least)
            .finish()
    }
}

impl JobRequest {
    pub(crate) fn new(client: LockClient, name: LockName) -> Self {
        Self {
            request: client
                .request(name, LockMode::Exclusive)
                .wait(Duration::ZERO),
            hold_at_least: None,
            on_lost: OnLost::Abort,
        }
    }

    /// Keeps the name held until `hold` after the job started, even if the body ends
    /// earlier or fails. Choose it above the largest skew between the instances' schedules
    /// (clock offsets plus scheduling delay) and below the job's period.
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.hold_at_least = Some(hold);
        self
    }

    /// The lease, with no watchdog: the hold ends `hold` after it began, whether the body
    /// finished or its instance died. A body still running then has lost the name
    /// ([`OnLost`] says what happens to it).
    ///
    /// # Default
    /// None: the watchdog renews the hold while the body runs.
    pub fn hold_at_most(mut self, hold: Duration) -> Self {
        self.request = self.request.lease(hold);
        self
    }

    /// Waits up to `wait` for the name before skipping the fire.
    ///
    /// # Default
    /// `Duration::ZERO`: a busy name skips at once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// The metrics label (see [`LockRequest::metrics_label`]).
    pub fn metrics_label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.request = self.request.metrics_label(label);
        self
    }

    /// A request id recorded with the hold, for operators.
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request = self.request.request_id(request_id);
        self
    }

    /// What happens to the body when the hold is lost; [`OnLost::Abort`] by default.
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Runs `body` when the name is free, inside a reentrancy [`scope`](crate::scope) (so
    /// [`current_lock`](crate::current_lock) gives the fencing token), then releases it —
    /// or, with [`hold_at_least`](Self::hold_at_least), leaves it held until the minimum is
    /// over. A busy name answers [`JobOutcome::Skipped`] without running `body`.
    ///
    /// # Errors
    /// [`LockError::InvalidRequest`] when `hold_at_least` exceeds `hold_at_most`; the
    /// acquisition errors of [`LockRequest::acquire`] but [`LockError::WaitTimeout`] (a
    /// skip); [`LockError::Lost`] when the hold was lost while `body` ran (with
    /// [`OnLost::Abort`]).
    ///
    /// # Cancel safety
    /// Dropping this future drops `body` and ends the hold in the background, lingering as
    /// a finished job does.
    pub async fn run<F: Future>(self, body: F) -> Result<JobOutcome<F::Output>, LockError> {
        self.check()?;
        let Self {
            request,
            hold_at_least,
            on_lost,
        } = self;
        scope(async move {
            let (label, names) = (request.options.label.clone(), request.trace_names());
            let guard = match request.acquire().await {
                Ok(guard) => guard,
                Err(LockError::WaitTimeout {
                    name,
                    remaining_ttl,
                    holder,
                    ..
                }) => {
                    tracing::debug!(
                        distlock.lock.template = &*label,
                        distlock.lock.name = observe::name(&name, names),
                        "job skipped: held elsewhere"
                    );
                    return Ok(JobOutcome::Skipped(Skipped {
                        name,
                        remaining_ttl,
                        holder,
                    }));
                }
                Err(error) => return Err(error),
            };
            let output = match hold_at_least {
                Some(least) => {
                    // From the start of the body: after the hold began in Redis, so the
                    // name is held at least that long whatever the wait or hand-off was.
                    let until = later(Instant::now(), least);
                    GuardedRun::new(Lingering::new(guard, until), on_lost, body).await
                }
                None => GuardedRun::new(guard, on_lost, body).await,
            };
            output.map(JobOutcome::Ran)
        })
        .await
    }

    /// `hold_at_least` within `hold_at_most`, each a valid lease.
    fn check(&self) -> Result<(), LockError> {
        let name = &self.request.name;
        let invalid = |reason: String| LockError::InvalidRequest {
            name: name.clone(),
            reason,
        };
        match (self.hold_at_least, self.request.options.lease) {
            (Some(least), Some(most)) if least > most => Err(invalid(format!(
                "hold_at_least ({least:?}) is longer than hold_at_most ({most:?}): the hold \
                 would end before its minimum"
            ))),
            (Some(least), _) if least.is_zero() => Err(invalid(
                "hold_at_least must be longer than zero (leave it out for none)".to_owned(),
            )),
            _ => Ok(()),
        }
    }
}
