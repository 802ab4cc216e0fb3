//! The checkers over a merged history:
//!
//! * [`registers`] (a): the fenced registers against the history — no acknowledged write
//!   lost or duplicated, accepted tokens rising per name, each register linearizable
//!   (stateright's linearizability tester);
//! * [`overlap`] (b) exclusion by kind over the stretches where SAFETY.md promises it
//!   without fencing, and (c) honesty: every hold that overlapped another was told;
//! * [`liveness`] (d): after the nemesis, every client acquires within a bound, and a lease
//!   after the end no key of any lock is left;
//! * [`handoff`] (j): whenever a name is free of live holders while a live waiter wants it,
//!   the next grant comes within a bound (a dead waiter must not keep a name);
//! * [`leader`] (e): one leader at a time per election, and overlapping terms told;
//! * [`jobs`] (f): each scheduled fire runs at most once while `hold_at_least` covers the
//!   skew;
//! * [`idempotency`] (g): each idempotency key's effect completed at most once;
//! * [`http`] (h): the idempotency layer over HTTP — one effect per key, every `2xx` naming
//!   it, one stored response replayed, no run after a completion within the retention, and
//!   no status but the documented ones;
//! * [`guarded`] (i): the registers beside the locks, written by guarded writes — no write
//!   by a holder that was not current landed.
//!
//! The unsafe windows come from the nemesis' faults, and on Sentinel also from the
//! Sentinels' own view ([`switches`]).

pub mod guarded;
pub mod handoff;
pub mod http;
pub mod idempotency;
pub mod jobs;
pub mod leader;
pub mod liveness;
pub mod overlap;
pub mod registers;
pub mod switches;

use std::collections::BTreeMap;

use crate::history::{Event, Mode, Outcome, Record};

/// A grant: when, the kind of hold, and `(name, token)` per name.
pub type Grant = (u64, Mode, Vec<(String, u64)>);

/// What the history says about one operation.
#[derive(Debug, Clone, Default)]
pub struct OpView {
    /// The process.
    pub p: u32,
    /// The op id.
    pub op: u64,
    /// Its kind (`lock`, `read`, …).
    pub kind: String,
    /// When it was invoked.
    pub invoked: u64,
    /// When the hold was granted, its mode and tokens.
    pub acquired: Option<Grant>,
    /// Timestamps at which `is_held()` was confirmed.
    pub held: Vec<u64>,
    /// When the holder was first told the hold is gone (`NotHeld`, `Lost`, a failed
    /// release or extend).
    pub told: Option<u64>,
    /// When the release was sent.
    pub releasing: Option<u64>,
    /// The last event of the op.
    pub last: u64,
    /// How it completed (none: the process died first).
    pub complete: Option<Outcome>,
}

impl OpView {
    /// The claim: from the grant to the last `is_held()` confirmation before the holder
    /// was told or released. None without any confirmation.
    pub fn claim(&self) -> Option<(u64, u64)> {
        let (start, ..) = self.acquired.as_ref()?;
        let stop = self
            .told
            .unwrap_or(u64::MAX)
            .min(self.releasing.unwrap_or(u64::MAX));
        let end = self.held.iter().copied().filter(|&t| t <= stop).max()?;
        Some((*start, end.max(*start)))
    }

    /// The use: from the grant to the release (or the process's last word).
    pub fn usage(&self) -> Option<(u64, u64)> {
        let (start, ..) = self.acquired.as_ref()?;
        Some((*start, self.releasing.unwrap_or(self.last).max(*start)))
    }
}

/// A stretch during which exclusion without fencing is not promised.
pub type Window = (u64, u64);

/// The history, indexed.
#[derive(Debug, Default)]
pub struct Indexed {
    /// Client operations by id.
    pub ops: BTreeMap<u64, OpView>,
    /// Unsafe windows (already widened by the margin).
    pub unsafe_windows: Vec<Window>,
    /// The unsafe windows of the controller's faults, which touch every name (not an
    /// operator's `force_release` of one lock name).
    pub shared_windows: Vec<Window>,
    /// Split-brain windows (widened too): honesty is not promised there.
    pub split_windows: Vec<Window>,
    /// Every fault of the controller, safe or not (widened too).
    pub fault_windows: Vec<Window>,
    /// An operator's `force_release`s, by lock name (widened too).
    pub forced: BTreeMap<String, Vec<Window>>,
    /// When the nemesis stopped.
    pub nemesis_end: Option<u64>,
    /// Client processes: number → (start, killed at).
    pub procs: BTreeMap<u32, (u64, Option<u64>)>,
}

fn failed(outcome: &Outcome) -> bool {
    !matches!(outcome, Outcome::Ok)
}

impl Indexed {
    /// Records `window` under its lock's name when `fault` is an operator's force release.
    fn add_forced(&mut self, fault: &str, window: Window) {
        if let Some(name) = fault.strip_prefix(FORCE_RELEASE) {
            self.forced.entry(name.to_owned()).or_default().push(window);
        }
    }

    /// Adds windows in which every name is unsafe and two masters may answer, as a fault's
    /// (a Sentinel switch of the named master: [`switches`]).
    pub fn add_split(&mut self, windows: &[Window]) {
        for &w in windows {
            self.unsafe_windows.push(w);
            self.shared_windows.push(w);
            self.split_windows.push(w);
            self.fault_windows.push(w);
        }
    }
}

/// How an operator's force release is named in the history: this, then the lock's name.
pub const FORCE_RELEASE: &str = "force_release ";

/// Indexes `records`; `margin` widens each unsafe window at its end (a lease and more).
pub fn index(records: &[Record], margin: u64) -> Indexed {
    let mut ix = Indexed::default();
    let mut open: BTreeMap<(u32, u64), (u64, bool, bool, String)> = BTreeMap::new();
    for r in records {
        if r.p == 0
            || matches!(
                r.ev,
                Event::FaultStart { .. } | Event::FaultEnd { .. } | Event::ClientId { .. }
            )
        {
            match &r.ev {
                Event::FaultStart {
                    fault,
                    unsafe_for_exclusion,
                    split_brain,
                } => {
                    let entry = (r.t, *unsafe_for_exclusion, *split_brain, fault.clone());
                    open.insert((r.p, r.op), entry);
                }
                Event::FaultEnd { .. } => {
                    if let Some((start, unsafe_, split, fault)) = open.remove(&(r.p, r.op)) {
                        ix.add_forced(&fault, (start, r.t + margin));
                        if r.p == 0 {
                            ix.fault_windows.push((start, r.t + margin));
                        }
                        if unsafe_ {
                            ix.unsafe_windows.push((start, r.t + margin));
                            if r.p == 0 {
                                ix.shared_windows.push((start, r.t + margin));
                            }
                        }
                        if split {
                            ix.split_windows.push((start, r.t + margin));
                        }
                    }
                }
                Event::NemesisEnd => ix.nemesis_end = Some(r.t),
                Event::ClientStart { .. } => {
                    ix.procs.insert(r.op as u32, (r.t, None));
                }
                Event::ClientKilled => {
                    if let Some(entry) = ix.procs.get_mut(&(r.op as u32)) {
                        entry.1 = Some(r.t);
                    }
                }
                _ => {}
            }
            if r.p == 0 || matches!(r.ev, Event::ClientId { .. }) {
                continue;
            }
        }
        let view = ix.ops.entry(r.op).or_insert_with(|| OpView {
            p: r.p,
            op: r.op,
            ..OpView::default()
        });
        view.last = view.last.max(r.t);
        let told = |view: &mut OpView| {
            view.told.get_or_insert(r.t);
        };
        match &r.ev {
            Event::Invoke { kind, .. } => {
                view.kind = kind.clone();
                view.invoked = r.t;
            }
            Event::Acquired { mode, tokens } => view.acquired = Some((r.t, *mode, tokens.clone())),
            Event::Held => view.held.push(r.t),
            Event::NotHeld | Event::Lost => told(view),
            Event::Extend { outcome } | Event::Released { outcome } if failed(outcome) => {
                told(view)
            }
            Event::Releasing => {
                view.releasing.get_or_insert(r.t);
            }
            Event::Complete { outcome } => view.complete = Some(outcome.clone()),
            _ => {}
        }
    }
    // A fault still open at the end (the run stopped in it) is unsafe to its end.
    for ((p, _), (start, unsafe_, split, fault)) in open {
        ix.add_forced(&fault, (start, u64::MAX));
        if p == 0 {
            ix.fault_windows.push((start, u64::MAX));
        }
        if unsafe_ {
            ix.unsafe_windows.push((start, u64::MAX));
            if p == 0 {
                ix.shared_windows.push((start, u64::MAX));
            }
        }
        if split {
            ix.split_windows.push((start, u64::MAX));
        }
    }
    ix
}

/// True when `[a, b]` meets any window.
pub fn in_windows(windows: &[Window], (a, b): (u64, u64)) -> bool {
    windows.iter().any(|&(s, e)| a <= e && s <= b)
}

/// A violation found by a checker: what, and the ops and time span to show.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The checker (`registers`, `exclusion`, `honesty`, `liveness`).
    pub checker: &'static str,
    /// What is wrong.
    pub what: String,
    /// The operations involved.
    pub ops: Vec<u64>,
    /// The time span to show.
    pub span: (u64, u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(t: u64, p: u32, start: bool) -> Record {
        let fault = if p == 0 {
            "redis-restart-empty"
        } else {
            "force_release x0"
        }
        .to_owned();
        let ev = if start {
            Event::FaultStart {
                fault,
                unsafe_for_exclusion: true,
                split_brain: false,
            }
        } else {
            Event::FaultEnd { fault }
        };
        Record { t, p, op: 7, ev }
    }

    #[test]
    fn an_operators_force_release_is_unsafe_but_not_shared() {
        let records = [
            fault(10, 0, true),
            fault(20, 0, false),
            fault(30, 1, true),
            fault(40, 1, false),
        ];
        let ix = index(&records, 5);
        assert_eq!(ix.unsafe_windows, vec![(10, 25), (30, 45)]);
        assert_eq!(ix.shared_windows, vec![(10, 25)]);
        assert_eq!(ix.fault_windows, vec![(10, 25)]);
        assert_eq!(ix.forced.get("x0"), Some(&vec![(30, 45)]));
    }
}
