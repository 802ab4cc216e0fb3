//! Scheduled jobs in the workload: every client process fires the same fire ids (one per
//! time slot of the shared monotonic clock, `job_<slot>`), each a little late by its own
//! skew, as instances of a fleet whose schedules drift. The body read-modify-writes the
//! `jobs` register with the hold's fencing token; skips are recorded.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::rng::Rng;
use lock_core::current_lock;
use lock_core::job::JobOutcome;

use crate::history::{Event, Outcome};
use crate::hold;
use crate::register::Registers;
use crate::workload::{failed, think_max, Ctx};

/// One fire per slot.
pub const SLOT: Duration = Duration::from_secs(2);
/// The largest skew a process fires with (past the slot's start).
pub const MAX_SKEW: Duration = Duration::from_millis(300);
/// `hold_at_least`: above the skew, with room for a loaded machine, below the slot.
pub const HOLD_AT_LEAST: Duration = Duration::from_millis(1000);
/// `hold_at_most` (the lease, no watchdog).
pub const HOLD_AT_MOST: Duration = Duration::from_millis(1500);
/// The register every fire's body writes.
pub const REGISTER: &str = "jobs";
/// The longest body: sometimes past `HOLD_AT_LEAST` (an ordinary release), mostly before
/// it (the name lingers).
const MAX_BODY: Duration = Duration::from_millis(1200);
/// At most this many fires per process, whatever the duration.
const MAX_FIRES: u64 = 100_000;

/// The job name of fire `fire`.
pub fn fire_name(fire: u64) -> String {
    format!("job_{fire}")
}

fn slot_ns() -> u64 {
    SLOT.as_nanos() as u64
}

/// Fires one job per slot until the run stops.
pub(crate) async fn scheduler(ctx: Arc<Ctx>, mut registers: Registers) {
    let mut rng = Rng::new(ctx.config.seed ^ 0x5c4e_d01e);
    let mut fire = monotonic_ns() / slot_ns() + 1;
    for _ in 0..MAX_FIRES {
        let at = fire * slot_ns() + rng.millis(Duration::ZERO, MAX_SKEW).as_nanos() as u64;
        tokio::time::sleep(Duration::from_nanos(at.saturating_sub(monotonic_ns()))).await;
        if ctx.stopping() {
            return;
        }
        // A process paused past its slot fires late: an instance far behind schedule.
        fire_once(&ctx, &mut registers, &mut rng, fire).await;
        fire = (fire + 1).max(monotonic_ns() / slot_ns() + 1);
    }
}

async fn fire_once(ctx: &Ctx, registers: &mut Registers, rng: &mut Rng, fire: u64) {
    let op = ctx.next_op();
    let name = fire_name(fire);
    let history = &ctx.history;
    history.log(
        op,
        Event::Invoke {
            kind: "job".to_owned(),
            names: vec![name.clone()],
        },
    );
    let think = rng.millis(Duration::ZERO, think_max(&ctx.config));
    let length = rng.millis(Duration::ZERO, MAX_BODY);
    let body = async {
        let token = current_lock().map_or(0, |info| info.fencing_token());
        history.log(op, Event::JobRan { token });
        hold::read_modify_write(history, registers, op, REGISTER, token, think).await;
        tokio::time::sleep(length).await;
    };
    let outcome = if ctx.no_lock() {
        body.await;
        Outcome::Ok
    } else {
        let job = (ctx.client.job(name))
            .hold_at_least(HOLD_AT_LEAST)
            .hold_at_most(HOLD_AT_MOST);
        match job.run(body).await {
            Ok(JobOutcome::Ran(())) => Outcome::Ok,
            Ok(JobOutcome::Skipped(skip)) => {
                let remaining_ms = skip.remaining_ttl().map(|d| d.as_millis() as u64);
                history.log(op, Event::Skipped { remaining_ms });
                Outcome::Fail("skipped".into())
            }
            Err(e) => failed(history, op, &e),
        }
    };
    history.log(op, Event::Complete { outcome });
}
