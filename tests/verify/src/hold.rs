//! One hold, whatever its kind: what the workload does between the grant and the release,
//! and what it records (the claim, the fenced register accesses, the signals).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use lock_core::{LockError, LockGuard, MultiLockGuard};

use crate::guarded::{self, Writes};
use crate::history::{Event, HistoryWriter, Mode, Outcome};
use crate::register::{appended, digest, Registers};
use crate::workload::failed;

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The guards the workload holds: a lock family guard, a multi-lock guard, or none (the
/// `nolock` control).
pub trait Guard: Send + Sync + 'static {
    /// `is_held()`.
    fn held(&self) -> bool;
    /// `lost()`, boxed.
    fn lost_signal(&self) -> BoxFuture<'static, ()>;
    /// `extend(lease)`.
    fn extend_by(&self, lease: Duration) -> BoxFuture<'_, Result<(), LockError>>;
    /// `release()`.
    fn release_now(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>>;
    /// The guards of the names held, for guarded writes (none for the stand-in).
    fn lock_guards(&self) -> &[LockGuard] {
        &[]
    }
}

/// The guards of the names a guard holds.
trait NamedGuards {
    fn named_guards(&self) -> &[LockGuard];
}

impl NamedGuards for LockGuard {
    fn named_guards(&self) -> &[LockGuard] {
        std::slice::from_ref(self)
    }
}

impl NamedGuards for MultiLockGuard {
    fn named_guards(&self) -> &[LockGuard] {
        self.guards()
    }
}

/// Both guards answer the same calls by the same names.
macro_rules! guard_by_inherent_methods {
    ($($guard:ty),*) => {$(
        impl Guard for $guard {
            fn held(&self) -> bool {
                self.is_held()
            }
            fn lost_signal(&self) -> BoxFuture<'static, ()> {
                Box::pin(self.lost())
            }
            fn extend_by(&self, lease: Duration) -> BoxFuture<'_, Result<(), LockError>> {
                Box::pin(self.extend(lease))
            }
            fn release_now(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>> {
                Box::pin((*self).release())
            }
            fn lock_guards(&self) -> &[LockGuard] {
                self.named_guards()
            }
        }
    )*};
}

guard_by_inherent_methods!(LockGuard, MultiLockGuard);

/// The `nolock` control's stand-in: always "held", never lost.
#[derive(Debug)]
pub struct NoGuard;

impl Guard for NoGuard {
    fn held(&self) -> bool {
        true
    }
    fn lost_signal(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }
    fn extend_by(&self, _: Duration) -> BoxFuture<'_, Result<(), LockError>> {
        Box::pin(async { Ok(()) })
    }
    fn release_now(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin(async { Ok(()) })
    }
}

/// What a hold does once granted.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Read-modify-write the registers of these `(name, token)` (exclusive and write holds).
    pub writes: Vec<(String, u64)>,
    /// Pause between the read and the write (the gap fencing closes).
    pub think: Duration,
    /// How long to keep the hold after the write (shorter or longer than the lease).
    pub hold: Duration,
    /// Extend the lease by this before releasing.
    pub extend: Option<Duration>,
    /// How the guarded registers of the `writes` names are written after their fenced ones.
    pub guarded: Writes,
}

/// An error's outcome: a definite failure, or unknown when Redis did not answer.
pub fn error_outcome(e: &LockError) -> Outcome {
    let kind = format!("{e:?}");
    let kind = kind
        .split([' ', '{', '('])
        .next()
        .unwrap_or("error")
        .to_owned();
    if e.is_unavailable() || matches!(e, LockError::Timeout { .. }) {
        Outcome::Info(kind)
    } else {
        Outcome::Fail(kind)
    }
}

/// Records `is_held()` as of now: `Held` stamped before the call (the claim never extends
/// past a moment the library confirmed), or `NotHeld`.
pub fn check_held(history: &HistoryWriter, op: u64, guard: &dyn Guard) -> bool {
    let before = monotonic_ns();
    if guard.held() {
        history.log_at(before, op, Event::Held);
        true
    } else {
        history.log(op, Event::NotHeld);
        false
    }
}

/// Runs `plan` under `guard`, then releases it; every step goes to the history.
pub async fn run(
    history: &HistoryWriter,
    registers: &mut Registers,
    op: u64,
    mode: Mode,
    tokens: Vec<(String, u64)>,
    guard: Box<dyn Guard>,
    plan: Plan,
) {
    history.log(op, Event::Acquired { mode, tokens });
    let releasing = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (lost, releasing, history) = (guard.lost_signal(), releasing.clone(), history.clone());
        tokio::spawn(async move {
            lost.await;
            if !releasing.load(Ordering::SeqCst) {
                history.log(op, Event::Lost);
            }
        })
    };
    if check_held(history, op, guard.as_ref()) {
        for (name, token) in &plan.writes {
            read_modify_write(history, registers, op, name, *token, plan.think).await;
            let guards = guard.lock_guards();
            guarded::under_guards(&plan.guarded, guards, history, op, name, *token, plan.think)
                .await;
        }
        tokio::time::sleep(plan.hold).await;
        if let Some(lease) = plan.extend {
            let outcome = match guard.extend_by(lease).await {
                Ok(()) => Outcome::Ok,
                Err(e) => failed(history, op, &e),
            };
            history.log(op, Event::Extend { outcome });
        }
        check_held(history, op, guard.as_ref());
    }
    releasing.store(true, Ordering::SeqCst);
    history.log(op, Event::Releasing);
    let outcome = match guard.release_now().await {
        Ok(()) => Outcome::Ok,
        Err(e) => failed(history, op, &e),
    };
    history.log(op, Event::Released { outcome });
    watcher.abort();
}

/// Reads register `name` with `token`, waits `think`, writes it back with `op` appended.
pub async fn read_modify_write(
    history: &HistoryWriter,
    registers: &mut Registers,
    op: u64,
    name: &str,
    token: u64,
    think: Duration,
) {
    let Ok(value) = fenced_read(history, registers, op, name, token).await else {
        return;
    };
    tokio::time::sleep(think).await;
    fenced_write(history, registers, op, name, token, &appended(&value, op)).await;
}

fn register_event(
    name: &str,
    token: u64,
    write: bool,
    sent: u64,
    digest: u64,
    outcome: Outcome,
) -> Event {
    Event::Register {
        name: name.to_owned(),
        token,
        write,
        sent,
        digest,
        outcome,
    }
}

/// Reads register `name` with `token` and records the access: the value, or how the
/// access failed (`Fail`: the token was stale; `Info`: the resource did not answer).
pub async fn fenced_read(
    history: &HistoryWriter,
    registers: &mut Registers,
    op: u64,
    name: &str,
    token: u64,
) -> Result<String, Outcome> {
    let sent = monotonic_ns();
    let (value, digest, outcome) = match registers.read(name, op, token).await {
        Ok(Ok(value)) => {
            let d = digest(&value);
            (Ok(value), d, Outcome::Ok)
        }
        Ok(Err(highest)) => {
            let stale = Outcome::Fail(format!("stale, highest {highest}"));
            (Err(stale.clone()), 0, stale)
        }
        Err(e) => {
            let unknown = Outcome::Info(e.to_string());
            (Err(unknown.clone()), 0, unknown)
        }
    };
    history.log(
        op,
        register_event(name, token, false, sent, digest, outcome),
    );
    value
}

/// Writes `new` to register `name` with `token` and records the access; returns how it
/// ended.
pub async fn fenced_write(
    history: &HistoryWriter,
    registers: &mut Registers,
    op: u64,
    name: &str,
    token: u64,
    new: &str,
) -> Outcome {
    let sent = monotonic_ns();
    let outcome = match registers.write(name, op, token, new).await {
        Ok(Ok(_)) => Outcome::Ok,
        Ok(Err(highest)) => Outcome::Fail(format!("stale, highest {highest}")),
        Err(e) => Outcome::Info(e.to_string()),
    };
    let event = register_event(name, token, true, sent, digest(new), outcome.clone());
    history.log(op, event);
    outcome
}
