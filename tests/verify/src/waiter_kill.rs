//! The waiter-kill fault: SIGKILL a client process while one of its operations waits for a
//! name (and start another) — just queued (waiting 20–250 ms), after a long wait (1 s or
//! more), or the moment the name's holder in another process sends its release, so that
//! the hand-off meets the kill. The victims are found in the client histories as they are
//! written ([`Tail`]). Every random choice is drawn before the search, so the seed fixes the
//! schedule's draws whatever the timing; a search that finds no victim within `SEARCH`
//! kills nobody. Under the `dead-grant` control every kill is at a hand-off.

use std::path::Path;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::rng::Rng;
use tokio::time::{sleep, Instant};

use crate::clients::Clients;
use crate::dead_grant::DeadGrant;
use crate::tail::Tail;

/// How long a search for a victim may last.
const SEARCH: Duration = Duration::from_secs(4);
/// How often the histories are read while searching.
const POLL: Duration = Duration::from_millis(1);
/// A wait this old (ns) has queued (an uncontended grant takes a round trip)…
const QUEUED_FROM: u64 = 20_000_000;
/// …and is still "just queued" until this old.
const QUEUED_UNTIL: u64 = 250_000_000;
/// A wait this old is a long one (the workload waits 0.5–3 s).
const LONG: u64 = 1_000_000_000;

/// When in its wait the victim is killed.
#[derive(Clone, Copy, Debug)]
enum Moment {
    Queued,
    Long,
    HandOff,
}

impl Moment {
    fn label(self) -> &'static str {
        match self {
            Self::Queued => "waiter-kill:queued",
            Self::Long => "waiter-kill:long-wait",
            Self::HandOff => "waiter-kill:hand-off",
        }
    }
}

/// The fault's state: the histories followed, and the `dead-grant` control when it runs.
#[derive(Debug)]
pub struct WaiterKill {
    tail: Tail,
    control: Option<DeadGrant>,
}

impl WaiterKill {
    /// Follows the histories in `dir`; `control` is told of each victim before its kill.
    pub fn new(dir: &Path, control: Option<DeadGrant>) -> Self {
        Self {
            tail: Tail::new(dir),
            control,
        }
    }

    /// Kills one waiting client (and starts another); returns what it did, for the counts.
    pub async fn apply(&mut self, rng: &mut Rng, clients: &mut Clients) -> &'static str {
        let drawn = [Moment::Queued, Moment::Long, Moment::HandOff][rng.index(3)];
        // Under the control every kill meets a hand-off: once grants skip waiters whose
        // client is gone, only a kill just after the grant leaves one to the dead.
        let moment = if self.control.is_some() {
            Moment::HandOff
        } else {
            drawn
        };
        let pick = rng.next_u64();
        let deadline = Instant::now() + SEARCH;
        let victim = match moment {
            Moment::HandOff => self.at_hand_off(pick, clients, deadline).await,
            _ => self.waiting(moment, pick, clients, deadline).await,
        };
        let Some(victim) = victim else {
            return "waiter-kill:no victim";
        };
        if let Some(index) = clients.live.iter().position(|c| c.proc == victim) {
            if let Err(e) = clients.kill_and_replace(index).await {
                eprintln!("verify: could not start a replacement client: {e}");
            }
        }
        moment.label()
    }

    /// Tells the control (if any) of `proc`, about to die, and of the names it waits for.
    async fn doom(&self, proc: u32) {
        let (Some(control), Some(view)) = (&self.control, self.tail.procs.get(&proc)) else {
            return;
        };
        let Some(id) = &view.id else {
            return;
        };
        let names: Vec<String> = view.waits.values().flat_map(|w| w.names.clone()).collect();
        control.watch(id, &names).await;
    }

    /// A process with a wait of the `moment`'s age.
    async fn waiting(
        &mut self,
        moment: Moment,
        pick: u64,
        clients: &Clients,
        deadline: Instant,
    ) -> Option<u32> {
        let (from, until) = match moment {
            Moment::Queued => (QUEUED_FROM, QUEUED_UNTIL),
            _ => (LONG, u64::MAX),
        };
        while Instant::now() < deadline {
            self.tail.poll();
            let now = monotonic_ns();
            let found: Vec<u32> = live_views(&self.tail, clients)
                .flat_map(|(proc, view)| view.waits.values().map(move |w| (proc, w)))
                .filter(|(_, w)| (from..until).contains(&now.saturating_sub(w.invoked)))
                .map(|(proc, _)| proc)
                .collect();
            if !found.is_empty() {
                let victim = found[(pick % found.len() as u64) as usize];
                self.doom(victim).await;
                return Some(victim);
            }
            sleep(POLL).await;
        }
        None
    }

    /// The process of the first waiter for a name held in another process, killed as soon
    /// as that hold's release is sent.
    async fn at_hand_off(
        &mut self,
        pick: u64,
        clients: &Clients,
        deadline: Instant,
    ) -> Option<u32> {
        let mut chosen = None;
        while chosen.is_none() && Instant::now() < deadline {
            self.tail.poll();
            let pairs = hand_offs(&self.tail, clients, monotonic_ns());
            if pairs.is_empty() {
                sleep(POLL).await;
            } else {
                chosen = Some(pairs[(pick % pairs.len() as u64) as usize]);
            }
        }
        let (holder, hold, victim) = chosen?;
        // Registered before the release: the grant it is waiting for is then a new one.
        self.doom(victim).await;
        while Instant::now() < deadline {
            self.tail.poll();
            let view = self.tail.procs.get(&holder)?;
            if view.releasing.contains(&hold) || !view.holds.contains_key(&hold) {
                return Some(victim);
            }
            sleep(POLL).await;
        }
        None
    }
}

/// The views of the live processes.
fn live_views<'a>(
    tail: &'a Tail,
    clients: &'a Clients,
) -> impl Iterator<Item = (u32, &'a crate::tail::ProcView)> {
    clients
        .live
        .iter()
        .filter_map(|c| Some((c.proc, tail.procs.get(&c.proc)?)))
}

/// `(holder process, hold op, waiting process)`: for each name held (release not sent) in
/// a live process, the longest-waiting live waiter of another process (the head of the
/// name's queue, most likely), waiting 20 ms or more.
fn hand_offs(tail: &Tail, clients: &Clients, now: u64) -> Vec<(u32, u64, u32)> {
    let mut out = Vec::new();
    for (holder, view) in live_views(tail, clients) {
        for (&hold, names) in &view.holds {
            if view.releasing.contains(&hold) {
                continue;
            }
            let first = live_views(tail, clients)
                .filter(|&(p, _)| p != holder)
                .flat_map(|(p, v)| v.waits.values().map(move |w| (p, w)))
                .filter(|(_, w)| w.names.iter().any(|n| names.contains(n)))
                .filter(|(_, w)| now.saturating_sub(w.invoked) >= QUEUED_FROM)
                .min_by_key(|(_, w)| w.invoked);
            if let Some((waiter, _)) = first {
                out.push((holder, hold, waiter));
            }
        }
    }
    out
}
