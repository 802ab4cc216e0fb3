//! A scheduled job's fire as a hold: the job runs a body that waits to be told to finish,
//! so the name is held from the body's start until the cell releases it. The job's future
//! is polled by the cell's own task (in the cell's reentrancy scope), never spawned.

use std::future::Future;
use std::pin::Pin;

use futures_util::FutureExt as _;
use lock_core::job::{JobOutcome, JobRequest};
use lock_core::{LockError, LockInfo};
use tokio::sync::oneshot;

type Fire = Pin<Box<dyn Future<Output = Result<JobOutcome<()>, LockError>> + Send>>;

/// A fire whose body is running (or has ended: `ended`).
pub(crate) struct JobHold {
    fire: Fire,
    finish: Option<oneshot::Sender<()>>,
    info: LockInfo,
    ended: Option<Result<(), LockError>>,
}

impl JobHold {
    /// Fires `job`: `None` when it was skipped (the name was held elsewhere).
    pub(crate) async fn start(job: JobRequest) -> Result<Option<Self>, LockError> {
        let (started, mut body_started) = oneshot::channel();
        let (finish, finished) = oneshot::channel::<()>();
        let mut fire: Fire = Box::pin(job.run(async move {
            let info = lock_core::current_lock().expect("the body runs under the job's hold");
            let _ = started.send(info);
            let _ = finished.await;
        }));
        // The fire first: a skip ends it before any body starts.
        let info = tokio::select! {
            biased;
            outcome = &mut fire => return match outcome? {
                JobOutcome::Skipped(_) => Ok(None),
                JobOutcome::Ran(()) => panic!("the body ended before it was told to"),
            },
            info = &mut body_started => info.expect("the body reports its start"),
        };
        Ok(Some(Self {
            fire,
            finish: Some(finish),
            info,
            ended: None,
        }))
    }

    pub(crate) fn token(&self) -> u64 {
        self.info.fencing_token()
    }

    /// The body's current lock, as `current_lock()` gave it there.
    pub(crate) fn info(&self) -> &LockInfo {
        &self.info
    }

    /// True while the body runs: with `OnLost::Abort`, the fire ends when the hold is lost.
    pub(crate) fn is_held(&mut self) -> bool {
        if self.ended.is_none() {
            if let Some(outcome) = (&mut self.fire).now_or_never() {
                self.ended = Some(ran(outcome));
            }
        }
        self.ended.is_none()
    }

    /// Resolves once the fire has ended (the body was aborted by a loss).
    pub(crate) async fn lost(&mut self) {
        if self.ended.is_none() {
            let outcome = (&mut self.fire).await;
            self.ended = Some(ran(outcome));
        }
    }

    /// Tells the body to finish, and answers how the fire ended.
    pub(crate) async fn release(mut self) -> Result<(), LockError> {
        if let Some(ended) = self.ended.take() {
            return ended;
        }
        let _ = self.finish.take().expect("released once").send(());
        ran(self.fire.await)
    }
}

fn ran(outcome: Result<JobOutcome<()>, LockError>) -> Result<(), LockError> {
    match outcome? {
        JobOutcome::Ran(()) => Ok(()),
        JobOutcome::Skipped(_) => panic!("a fire whose body started cannot be skipped"),
    }
}
