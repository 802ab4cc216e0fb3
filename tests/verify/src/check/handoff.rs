//! (j) Hand-off liveness: from the moment a name is free of live holders while a live
//! waiter wants it, the next grant of the name comes within a bound. A hand-off to a waiter
//! that died (its grant never shows in the history) must not keep the name longer.
//!
//! What the history shows, for each name of the workload's locks:
//! * a *holder* from its grant to its release sent or to the moment it was told the hold is
//!   gone. A holder whose process was killed keeps the name until the kill + its lease
//!   (twice the lease when it had called `extend`): a dead holder legitimately blocks that
//!   long. A `lock_all` not yet granted may already hold its names but the last in key
//!   order (it takes them one by one in that order), so it counts as their holder from its
//!   invocation;
//! * a *waiter* from its invocation to its grant, its failure, or its process's death: a
//!   dead waiter stops counting at its death;
//! * a *grant*: any `Acquired` of the name.
//!
//! A name is *blocked* while fewer holders count than it has room for (2 permits for the
//! semaphore; else 1, as any reader keeps a writer out) and a live waiter wants it. Every
//! blocked stretch is cut at its grants, and a piece longer than the bound is a violation.
//! Faults that legitimately delay grants — a paused client, every Redis fault, a Sentinel
//! switch — are cut out from their start to `margin` after their end; kills are not: they
//! are what this checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Indexed, OpView, Violation, Window};
use crate::history::{Event, Outcome, Record};
use crate::workload::{EXCLUSIVE, LEASE, READ_WRITE, SEMAPHORE};

/// The default bound (ns), provisional: a grant to a dead waiter blocks a name for at most
/// a claim (~1.5 s), and live waiters retry within ~1.5 s more.
pub const BOUND: u64 = 3_000_000_000;

/// The checker's name in violations and the report.
pub const CHECKER: &str = "handoff";

/// The nemesis' faults that do not excuse a slow grant: the kills.
const KILLS: [&str; 2] = ["client-kill", "waiter-kill"];

/// Operation kinds that wait for their name (`try` does not wait; `lock_all` counts as a
/// holder, see the module's docs).
pub(crate) const WAITING: [&str; 8] = [
    "lock",
    "write",
    "read",
    "semaphore",
    "reenter",
    "run",
    "cancel",
    "wait_timeout",
];

/// How many holders a name has room for; none: not a name this checker follows.
fn room(name: &str) -> Option<i64> {
    if name == SEMAPHORE.0 {
        Some(i64::from(SEMAPHORE.1))
    } else {
        EXCLUSIVE
            .iter()
            .chain(&READ_WRITE)
            .any(|n| *n == name)
            .then_some(1)
    }
}

/// What the checker measured: every piece of every blocked stretch (ns), longest last.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Each piece's length, sorted.
    pub pieces: Vec<u64>,
}

impl Stats {
    /// The piece at quantile `q` (0..=1), in milliseconds; 0 without any.
    pub fn quantile_ms(&self, q: f64) -> u64 {
        let Some(last) = self.pieces.len().checked_sub(1) else {
            return 0;
        };
        self.pieces[(last as f64 * q).round() as usize] / 1_000_000
    }
}

/// One name's timeline.
#[derive(Debug, Default)]
struct Timeline {
    holders: Vec<Window>,
    waiters: Vec<(u64, u64, u64)>,
    grants: Vec<u64>,
}

/// What the records add to the indexed ops: each op's names, and the ops that extended.
struct Extra {
    names: HashMap<u64, Vec<String>>,
    extended: BTreeSet<u64>,
    excused: Vec<Window>,
}

fn extra(records: &[Record], margin: u64) -> Extra {
    let mut names = HashMap::new();
    let mut extended = BTreeSet::new();
    let mut excused = Vec::new();
    let mut open: BTreeMap<u64, u64> = BTreeMap::new();
    for r in records {
        match &r.ev {
            Event::Invoke { names: n, .. } if r.p != 0 => {
                names.insert(r.op, n.clone());
            }
            Event::Extend {
                outcome: Outcome::Ok,
            } => {
                extended.insert(r.op);
            }
            Event::FaultStart { fault, .. } if r.p == 0 && !KILLS.contains(&fault.as_str()) => {
                open.insert(r.op, r.t);
            }
            Event::FaultEnd { .. } if r.p == 0 => {
                if let Some(start) = open.remove(&r.op) {
                    excused.push((start, r.t.saturating_add(margin)));
                }
            }
            _ => {}
        }
    }
    excused.extend(open.into_values().map(|start| (start, u64::MAX)));
    Extra {
        names,
        extended,
        excused,
    }
}

/// When `view`'s hold stops counting: released or told, else (killed) the kill + its
/// lease, else its last word.
fn hold_end(view: &OpView, killed: Option<u64>, extended: bool) -> u64 {
    let lease = LEASE.as_nanos() as u64 * if extended { 2 } else { 1 };
    let stop = view.told.into_iter().chain(view.releasing).min();
    match (stop, killed) {
        (Some(stop), _) => stop,
        (None, Some(kill)) => kill + lease,
        (None, None) => view.last,
    }
}

fn timelines(ix: &Indexed, extra: &Extra) -> BTreeMap<String, Timeline> {
    let mut out: BTreeMap<String, Timeline> = BTreeMap::new();
    for view in ix.ops.values() {
        let Some(names) = extra.names.get(&view.op) else {
            continue;
        };
        let names: Vec<&String> = names.iter().filter(|n| room(n).is_some()).collect();
        let killed = ix.procs.get(&view.p).and_then(|&(_, k)| k);
        let waits = WAITING.contains(&view.kind.as_str());
        let multi = view.kind == "lock_all";
        let lease = LEASE.as_nanos() as u64;
        // A wait (or a `lock_all`'s partial hold) ends at the grant, the failure, or the death.
        let unanswered = match (&view.complete, killed) {
            (None, Some(kill)) => kill,
            _ => view.last,
        };
        let wait_end = view.acquired.as_ref().map_or(unanswered, |a| a.0);
        if waits {
            for name in &names {
                let line = out.entry((*name).clone()).or_default();
                line.waiters.push((view.invoked, wait_end, view.op));
            }
        }
        if multi {
            let end = match (&view.acquired, &view.complete, killed) {
                (None, None, Some(kill)) => kill + lease,
                _ => wait_end,
            };
            // The names share the key prefix: their order is their keys'.
            let mut taken_first = names.clone();
            taken_first.sort();
            taken_first.pop();
            for name in taken_first {
                let line = out.entry(name.clone()).or_default();
                line.holders.push((view.invoked, end));
            }
        }
        if let Some((t, _, tokens)) = &view.acquired {
            let end = hold_end(view, killed, extra.extended.contains(&view.op)).max(*t);
            for (name, _) in tokens.iter().filter(|(n, _)| room(n).is_some()) {
                let line = out.entry(name.clone()).or_default();
                line.grants.push(*t);
                line.holders.push((*t, end));
            }
        }
    }
    out
}

/// The parts of `[a, b]` outside every window.
fn outside(windows: &[Window], (a, b): Window) -> Vec<Window> {
    let mut cuts: Vec<Window> = windows
        .iter()
        .copied()
        .filter(|&(s, e)| s < b && a < e)
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut from = a;
    for (s, e) in cuts {
        if s > from {
            out.push((from, s));
        }
        from = from.max(e);
    }
    if from < b {
        out.push((from, b));
    }
    out
}

/// The blocked pieces of one name: each from the moment the name became blocked (or its
/// last grant while blocked) to its next grant or to the moment it stopped being blocked.
fn blocked(name: &str, line: &Timeline) -> Vec<Window> {
    let room = room(name).unwrap_or(1);
    // (time, holders delta, waiters delta, grant)
    let mut steps: Vec<(u64, i64, i64, bool)> = Vec::new();
    for &(s, e) in &line.holders {
        steps.extend([(s, 1, 0, false), (e, -1, 0, false)]);
    }
    for &(s, e, _) in &line.waiters {
        if e > s {
            steps.extend([(s, 0, 1, false), (e, 0, -1, false)]);
        }
    }
    steps.extend(line.grants.iter().map(|&t| (t, 0, 0, true)));
    steps.sort_unstable_by_key(|s| s.0);
    let (mut holders, mut waiters) = (0i64, 0i64);
    let mut since: Option<u64> = None;
    let mut out = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let t = steps[i].0;
        let mut granted = false;
        while i < steps.len() && steps[i].0 == t {
            holders += steps[i].1;
            waiters += steps[i].2;
            granted |= steps[i].3;
            i += 1;
        }
        let now_blocked = holders < room && waiters > 0;
        if let Some(from) = since {
            if granted || !now_blocked {
                out.push((from, t));
                since = None;
            }
        }
        if now_blocked && since.is_none() {
            since = Some(t);
        }
    }
    out
}

/// Checks every name; `bound` in ns, `margin` widens the excused faults at their end.
pub fn check(records: &[Record], ix: &Indexed, bound: u64, margin: u64) -> (Vec<Violation>, Stats) {
    let extra = extra(records, margin);
    // Times in messages count from the history's start, as the report's context lines do.
    let base = records.first().map_or(0, |r| r.t);
    let mut excused = extra.excused.clone();
    excused.extend(&ix.split_windows);
    let mut violations = Vec::new();
    let mut stats = Stats::default();
    for (name, line) in timelines(ix, &extra) {
        for piece in blocked(&name, &line)
            .into_iter()
            .flat_map(|p| outside(&excused, p))
        {
            let gap = piece.1 - piece.0;
            stats.pieces.push(gap);
            if gap > bound {
                violations.push(violation(&name, &line, piece, bound, base));
            }
        }
    }
    stats.pieces.sort_unstable();
    (violations, stats)
}

/// How far back a violation names the waiters that may have left a dead grant behind.
const LOOK_BACK: u64 = 10_000_000_000;

fn violation(name: &str, line: &Timeline, (a, b): Window, bound: u64, base: u64) -> Violation {
    let ops: Vec<u64> = line
        .waiters
        .iter()
        .filter(|&&(s, e, _)| s <= b && e >= a.saturating_sub(LOOK_BACK))
        .map(|&(.., op)| op)
        .take(8)
        .collect();
    Violation {
        checker: CHECKER,
        what: format!(
            "{name}: free of live holders while a live waiter wanted it from t={:.3} s to \
             t={:.3} s with no grant: {:.2} s (bound {:.1} s)",
            a.saturating_sub(base) as f64 / 1e9,
            b.saturating_sub(base) as f64 / 1e9,
            (b - a) as f64 / 1e9,
            bound as f64 / 1e9
        ),
        ops,
        span: (a.saturating_sub(LOOK_BACK / 5), b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::index;
    use crate::history::Mode;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;
    const MARGIN: u64 = 3 * S;

    fn rec(t: u64, p: u32, op: u64, ev: Event) -> Record {
        Record { t, p, op, ev }
    }
    fn start(t: u64, p: u32) -> Record {
        rec(t, 0, u64::from(p), Event::ClientStart { pid: p })
    }
    fn killed(t: u64, p: u32) -> Record {
        rec(t, 0, u64::from(p), Event::ClientKilled)
    }
    fn invoke(t: u64, p: u32, op: u64, kind: &str, names: &[&str]) -> Record {
        let names = names.iter().map(|n| n.to_string()).collect();
        let kind = kind.to_owned();
        rec(t, p, op, Event::Invoke { kind, names })
    }
    fn acquired(t: u64, p: u32, op: u64, mode: Mode, names: &[&str]) -> Record {
        let tokens = names.iter().map(|n| (n.to_string(), t)).collect();
        rec(t, p, op, Event::Acquired { mode, tokens })
    }
    fn releasing(t: u64, p: u32, op: u64) -> Record {
        rec(t, p, op, Event::Releasing)
    }
    fn complete(t: u64, p: u32, op: u64, outcome: Outcome) -> Record {
        rec(t, p, op, Event::Complete { outcome })
    }
    fn fault(t: u64, op: u64, fault: &str, begins: bool) -> Record {
        let fault = fault.to_owned();
        let ev = if begins {
            Event::FaultStart {
                fault,
                unsafe_for_exclusion: false,
                split_brain: false,
            }
        } else {
            Event::FaultEnd { fault }
        };
        rec(t, 0, op, ev)
    }
    /// A hold of `name` by `p` from `from` to `to`, invoked just before.
    fn hold(p: u32, op: u64, name: &str, from: u64, to: u64) -> Vec<Record> {
        vec![
            invoke(from - MS, p, op, "lock", &[name]),
            acquired(from, p, op, Mode::Exclusive, &[name]),
            releasing(to, p, op),
            complete(to + MS, p, op, Outcome::Ok),
        ]
    }
    fn run(mut records: Vec<Record>) -> (Vec<Violation>, Stats) {
        records.sort_by_key(|r| (r.t, r.p, r.op));
        let ix = index(&records, MARGIN);
        check(&records, &ix, BOUND, MARGIN)
    }
    /// Three clients; 2's waiter is killed; 1 holds `x0` until 1 s; 3 waits from 0.6 s and is
    /// granted at `granted`, or gives up at 3.6 s after waiting again from 3.0 s, granted then.
    fn dead_waiter(granted: u64) -> Vec<Record> {
        let mut r = vec![start(0, 1), start(0, 2), start(0, 3)];
        r.extend(hold(1, 11, "x0", 100 * MS, S));
        r.extend([
            invoke(200 * MS, 2, 21, "lock", &["x0"]),
            killed(500 * MS, 2),
            invoke(600 * MS, 3, 31, "lock", &["x0"]),
        ]);
        let last = if granted <= 3600 * MS {
            31
        } else {
            r.extend([
                complete(3600 * MS, 3, 31, Outcome::Fail("WaitTimeout".into())),
                invoke(3000 * MS, 3, 32, "lock", &["x0"]),
            ]);
            32
        };
        r.extend([
            acquired(granted, 3, last, Mode::Exclusive, &["x0"]),
            releasing(granted + 10 * MS, 3, last),
        ]);
        r
    }

    #[test]
    fn a_prompt_hand_off_passes() {
        let (violations, stats) = run(dead_waiter(1010 * MS));
        assert!(violations.is_empty(), "{violations:?}");
        // The holder's own uncontended acquisition (1 ms), then the hand-off (10 ms).
        assert_eq!(stats.pieces, vec![MS, 10 * MS]);
    }

    #[test]
    fn a_grant_kept_by_a_dead_waiter_fires_naming_the_name_and_the_gap() {
        let (violations, stats) = run(dead_waiter(11 * S));
        assert_eq!(violations.len(), 1, "{violations:?}");
        let v = &violations[0];
        assert_eq!(v.checker, CHECKER);
        assert!(v.what.starts_with("x0: "), "{}", v.what);
        assert!(v.what.contains("t=1.000 s to t=11.000 s"), "{}", v.what);
        assert!(v.what.contains("10.00 s (bound 3.0 s)"), "{}", v.what);
        assert!(v.ops.contains(&21) && v.ops.contains(&32), "{:?}", v.ops);
        assert_eq!(stats.quantile_ms(1.0), 10_000);
    }

    #[test]
    fn a_dead_holder_blocks_for_its_lease_and_no_longer() {
        let base = |granted: u64| {
            let mut r = vec![start(0, 1), start(0, 2)];
            r.extend([
                invoke(0, 1, 11, "lock", &["x0"]),
                acquired(MS, 1, 11, Mode::Exclusive, &["x0"]),
                killed(500 * MS, 1),
                invoke(600 * MS, 2, 21, "lock", &["x0"]),
                acquired(granted, 2, 21, Mode::Exclusive, &["x0"]),
                releasing(granted + MS, 2, 21),
            ]);
            r
        };
        // Free from 1.5 s (kill + a 1 s lease): a grant at 4.4 s is 2.9 s later.
        assert!(run(base(4400 * MS)).0.is_empty());
        assert_eq!(run(base(4600 * MS)).0.len(), 1);
        // An extended hold's lease may be twice as long.
        let mut extended = base(5400 * MS);
        extended.push(rec(
            100 * MS,
            1,
            11,
            Event::Extend {
                outcome: Outcome::Ok,
            },
        ));
        assert!(run(extended).0.is_empty());
    }

    #[test]
    fn a_live_waiter_alone_on_a_free_name_too_long_fires() {
        let mut r = vec![start(0, 1)];
        r.extend([
            invoke(0, 1, 11, "read", &["rw0"]),
            complete(3500 * MS, 1, 11, Outcome::Fail("WaitTimeout".into())),
        ]);
        assert_eq!(run(r.clone()).0.len(), 1);
        // Giving up within the bound is no violation.
        r[2] = complete(2500 * MS, 1, 11, Outcome::Fail("WaitTimeout".into()));
        assert!(run(r).0.is_empty());
    }

    #[test]
    fn excused_faults_are_cut_out_and_kills_are_not() {
        for (name, excused) in [
            ("client-pause", true),
            ("redis-restart-empty", true),
            ("waiter-kill", false),
            ("client-kill", false),
        ] {
            let mut r = dead_waiter(11 * S);
            r.extend([
                fault(200 * MS, 90, name, true),
                fault(7 * S, 90, name, false),
            ]);
            let (violations, _) = run(r);
            assert_eq!(violations.is_empty(), excused, "{name}: {violations:?}");
        }
        // The rest of a stretch after the fault and its margin still counts: 8 s to 11 s is
        // within the bound, 6 s to 11 s is not.
        let mut r = dead_waiter(11 * S);
        let name = "client-pause";
        r.extend([
            fault(200 * MS, 90, name, true),
            fault(5 * S, 90, name, false),
        ]);
        let (violations, stats) = run(r);
        assert_eq!(violations.len(), 0, "{violations:?}");
        assert_eq!(stats.pieces, vec![MS, 3 * S]);
        let mut r = dead_waiter(11 * S);
        r.extend([
            fault(200 * MS, 90, name, true),
            fault(3 * S, 90, name, false),
        ]);
        let (violations, _) = run(r);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].what.contains("t=6.000 s to t=11.000 s"));
    }

    #[test]
    fn a_semaphore_is_blocked_only_below_its_permits() {
        let mut r = vec![start(0, 1), start(0, 2), start(0, 3)];
        r.extend([
            invoke(0, 1, 11, "semaphore", &["s0"]),
            acquired(MS, 1, 11, Mode::Permit, &["s0"]),
            releasing(9 * S, 1, 11),
            invoke(0, 2, 21, "semaphore", &["s0"]),
            acquired(MS, 2, 21, Mode::Permit, &["s0"]),
            releasing(9 * S, 2, 21),
            invoke(S, 3, 31, "semaphore", &["s0"]),
            acquired(9 * S + MS, 3, 31, Mode::Permit, &["s0"]),
            releasing(9 * S + 2 * MS, 3, 31),
        ]);
        assert!(run(r.clone()).0.is_empty());
        // One permit free (a holder released at 2 s) and the waiter kept out until 9 s.
        r[5] = releasing(2 * S, 1, 11);
        assert_eq!(run(r).0.len(), 1);
    }

    #[test]
    fn a_lock_all_not_yet_granted_may_hold_its_names() {
        let waiter = |granted: u64| {
            [
                invoke(100 * MS, 2, 21, "lock", &["x0"]),
                acquired(granted, 2, 21, Mode::Exclusive, &["x0"]),
                releasing(granted + MS, 2, 21),
            ]
        };
        let mut r = vec![start(0, 1), start(0, 2)];
        r.extend([
            invoke(0, 1, 11, "lock_all", &["x0", "x1"]),
            acquired(4 * S, 1, 11, Mode::Exclusive, &["x0", "x1"]),
            releasing(4 * S + MS, 1, 11),
        ]);
        r.extend(waiter(4 * S + 2 * MS));
        assert!(run(r).0.is_empty());
        // Killed while waiting: its partial holds are a dead holder's, a lease long.
        let mut r = vec![start(0, 1), start(0, 2)];
        r.extend([
            invoke(0, 1, 11, "lock_all", &["x0", "x1"]),
            killed(500 * MS, 1),
        ]);
        r.extend(waiter(4 * S));
        assert!(run(r.clone()).0.is_empty());
        r.truncate(4);
        r.extend(waiter(5 * S));
        let (violations, _) = run(r);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].what.contains("t=1.500 s to t=5.000 s"));
        // It takes its last name (in key order) last: that one it does not hold meanwhile.
        let mut r = vec![start(0, 1), start(0, 2)];
        r.extend([
            invoke(0, 1, 11, "lock_all", &["x1", "x0"]),
            complete(4 * S, 1, 11, Outcome::Fail("WaitTimeout".into())),
            invoke(100 * MS, 2, 21, "lock", &["x1"]),
            complete(4 * S, 2, 21, Outcome::Fail("WaitTimeout".into())),
        ]);
        let (violations, _) = run(r);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].what.starts_with("x1: "));
    }

    /// Re-judges a saved run's directory:
    /// `DISTLOCK_VERIFY_HISTORY=<dir> cargo test -p distlock-verify --lib rejudge -- --ignored --nocapture`
    /// (`--handoff-bound-ms` as `DISTLOCK_VERIFY_BOUND_MS`).
    #[test]
    #[ignore = "needs a saved run"]
    fn rejudge_a_saved_history() {
        let dir = std::env::var("DISTLOCK_VERIFY_HISTORY").expect("a run's directory");
        let bound = std::env::var("DISTLOCK_VERIFY_BOUND_MS")
            .map_or(BOUND, |ms| ms.parse::<u64>().expect("milliseconds") * MS);
        let records = crate::history::load(std::path::Path::new(&dir)).unwrap();
        let ix = index(&records, MARGIN);
        let (violations, stats) = check(&records, &ix, bound, MARGIN);
        for v in &violations {
            println!("{} (ops {:?})", v.what, v.ops);
        }
        println!(
            "{} violations; {} pieces, p50 {} ms, p99 {} ms, longest {} ms",
            violations.len(),
            stats.pieces.len(),
            stats.quantile_ms(0.5),
            stats.quantile_ms(0.99),
            stats.quantile_ms(1.0)
        );
    }

    #[test]
    fn outside_cuts_windows_out_of_a_piece() {
        assert_eq!(outside(&[(2, 4)], (0, 10)), vec![(0, 2), (4, 10)]);
        assert_eq!(outside(&[(0, 4), (3, 12)], (1, 10)), vec![]);
        assert_eq!(outside(&[], (1, 10)), vec![(1, 10)]);
    }
}
