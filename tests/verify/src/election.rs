//! Leader elections in the workload: a task campaigns in one of two elections (for a
//! bounded while), and while it leads, read-modify-writes the register named after the
//! election with the term's fencing token, reads `leader()`, then resigns after a random
//! time. A term is an exclusive hold of the election's name, recorded as one
//! ([`hold::run`]).

use std::time::Duration;

use distlock_tests::fault::rng::Rng;
use lock_core::election::Leadership;
use lock_core::LockError;

use crate::history::{Event, Mode, Outcome};
use crate::hold::{self, BoxFuture, Guard, NoGuard, Plan};
use crate::register::Registers;
use crate::workload::{failed, pick, plan, Ctx, LEASE};

/// The elections (also their registers).
pub const ELECTIONS: [&str; 2] = ["leader_e0", "leader_e1"];

/// True for an election's name.
pub fn is_election(name: &str) -> bool {
    ELECTIONS.contains(&name)
}

impl Guard for Leadership {
    fn held(&self) -> bool {
        self.is_leader()
    }
    fn lost_signal(&self) -> BoxFuture<'static, ()> {
        Box::pin(self.lost())
    }
    fn extend_by(&self, lease: Duration) -> BoxFuture<'_, Result<(), LockError>> {
        Box::pin(self.guard().extend(lease))
    }
    fn release_now(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin((*self).resign())
    }
}

/// Campaigns for up to 0.5–3 s; a term lasts up to 2.5 leases (the watchdog renews it).
pub(crate) async fn campaign(ctx: &Ctx, registers: &mut Registers, rng: &mut Rng, op: u64) {
    let name = pick(rng, &ELECTIONS);
    let history = &ctx.history;
    history.log(
        op,
        Event::Invoke {
            kind: "campaign".to_owned(),
            names: vec![name.to_owned()],
        },
    );
    let patience = rng.millis(Duration::from_millis(500), Duration::from_millis(3000));
    let (guard, token): (Box<dyn Guard>, u64) = if ctx.no_lock() {
        (Box::new(NoGuard), 0)
    } else {
        let election = ctx
            .client
            .election(name)
            .value(format!("p{}", ctx.config.proc));
        match tokio::time::timeout(patience, election.campaign()).await {
            Ok(Ok(term)) => {
                let token = term.fencing_token();
                // Who leads, as followers read it: this term, while it is confirmed after.
                if let Ok(leader) = election.leader().await {
                    let token = leader.map(|l| l.fencing_token());
                    history.log(op, Event::LeaderRead { token });
                }
                (Box::new(term), token)
            }
            Ok(Err(e)) => {
                let outcome = failed(history, op, &e);
                return history.log(op, Event::Complete { outcome });
            }
            // Still a follower: dropping the campaign leaves no term held.
            Err(_) => {
                let outcome = Outcome::Fail("follower".into());
                return history.log(op, Event::Complete { outcome });
            }
        }
    };
    let tokens = vec![(name.to_owned(), token)];
    let plan = Plan {
        hold: rng.millis(Duration::ZERO, LEASE * 5 / 2),
        ..plan(ctx, rng, tokens.clone())
    };
    hold::run(history, registers, op, Mode::Exclusive, tokens, guard, plan).await;
    let outcome = Outcome::Ok;
    history.log(op, Event::Complete { outcome });
}
