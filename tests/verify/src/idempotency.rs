//! Idempotency keys in the workload: tasks of every process retry one request per key,
//! over a few keys per epoch of the shared monotonic clock (`idem_<epoch>_<k>`, so that a
//! key is only begun while its record is surely retained). A request that runs appends to
//! the key's fenced register with the in-flight hold's token, then completes — or, now and
//! then, gives up (the key is free again and a retry runs it).

use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::rng::Rng;
use lock_core::idempotency::{Begin, Fingerprint, IdempotencyError};

use crate::history::{Event, Outcome};
use crate::hold::{self, error_outcome};
use crate::register::Registers;
use crate::workload::{plan, Ctx};

/// A key is begun only during its epoch.
pub const EPOCH: Duration = Duration::from_secs(3);
/// Keys per epoch.
pub const KEYS: u64 = 2;
/// How long a completed key's record is kept: past its epoch with room for a paused
/// process, and short enough that none is left when the run's keys are counted.
pub const RETENTION: Duration = Duration::from_secs(12);

/// The name of key `k` of `epoch`.
pub fn key_name(epoch: u64, k: u64) -> String {
    format!("idem_{epoch}_{k}")
}

/// One `begin` of a key of the current epoch, and the request when it runs.
pub(crate) async fn attempt(ctx: &Ctx, registers: &mut Registers, rng: &mut Rng, op: u64) {
    let epoch = monotonic_ns() / EPOCH.as_nanos() as u64;
    let key = key_name(epoch, rng.below(0..KEYS));
    let history = &ctx.history;
    history.log(
        op,
        Event::Invoke {
            kind: "idempotent".to_owned(),
            names: vec![key.clone()],
        },
    );
    let plan = plan(ctx, rng, vec![]);
    let give_up = rng.below(0..10) == 0;
    let key = key.as_str();
    let request = |token| async move {
        history.log(op, Event::InFlight { token });
        hold::read_modify_write(history, registers, op, key, token, plan.think).await;
        tokio::time::sleep(plan.hold).await;
    };
    let outcome = if ctx.no_lock() {
        request(0).await;
        let sent = monotonic_ns();
        let outcome = Outcome::Ok;
        history.log(op, Event::Completed { sent, outcome });
        Outcome::Ok
    } else {
        let idempotency = ctx.client.idempotency(key).retention(RETENTION);
        match idempotency.begin(&Fingerprint::of(key)).await {
            Ok(Begin::Replay(_)) => {
                history.log(op, Event::Replayed);
                Outcome::Ok
            }
            Ok(Begin::Run(in_flight)) => {
                request(in_flight.guard().fencing_token()).await;
                if give_up {
                    let _ = in_flight.release().await;
                    Outcome::Fail("gave up".into())
                } else {
                    let sent = monotonic_ns();
                    let outcome = match in_flight.complete(b"done").await {
                        Ok(()) => Outcome::Ok,
                        Err(e) => outcome_of(&e),
                    };
                    let completed = Event::Completed {
                        sent,
                        outcome: outcome.clone(),
                    };
                    history.log(op, completed);
                    outcome
                }
            }
            Err(e) => outcome_of(&e),
        }
    };
    history.log(op, Event::Complete { outcome });
}

fn outcome_of(e: &IdempotencyError) -> Outcome {
    match e {
        IdempotencyError::Lock(e) => error_outcome(e),
        IdempotencyError::InFlight { .. } => Outcome::Fail("in flight".into()),
        IdempotencyError::Lost { .. } => Outcome::Fail("lost".into()),
        IdempotencyError::Mismatch { .. } => Outcome::Fail("mismatch".into()),
        other => Outcome::Fail(format!("{other}")),
    }
}
