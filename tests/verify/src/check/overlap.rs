//! (b) Exclusion by kind and (c) honesty, by one sweep over intervals per name:
//! exclusive and write holds overlap nothing, readers overlap only readers, at most N
//! permits at once.
//!
//! * Exclusion looks at *claims* (grant → last `is_held()` confirmation) outside the unsafe
//!   windows: what the library told a holder must never be shared.
//! * Honesty looks at *uses* (grant → release sent, whatever the faults): holds that were
//!   used at once must not all be untold.

use std::collections::BTreeMap;

use super::{in_windows, Indexed, OpView, Violation, Window};
use crate::election::is_election;
use crate::history::{Event, Mode, Record};
use crate::workload::SEMAPHORE;

/// An interval of one hold on one name.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    mode: Mode,
    op: u64,
}

fn conflicts(a: Mode, b: Mode) -> bool {
    !matches!(
        (a, b),
        (Mode::Permit, Mode::Permit) | (Mode::Read, Mode::Read)
    )
}

/// Sweeps the spans of each name; `report` decides whether a set of overlapping spans
/// (the new one last) is a violation.
fn sweep(spans: BTreeMap<String, Vec<Span>>, mut report: impl FnMut(&str, &[Span])) {
    for (name, mut spans) in spans {
        spans.sort_by_key(|s| s.start);
        let mut active: Vec<Span> = Vec::new();
        for span in spans {
            active.retain(|a| a.end > span.start);
            let permits = active.iter().filter(|a| a.mode == Mode::Permit).count();
            let mut clash: Vec<Span> = active
                .iter()
                .copied()
                .filter(|a| a.mode != Mode::Permit && conflicts(a.mode, span.mode))
                .collect();
            if span.mode == Mode::Permit && permits >= SEMAPHORE.1 as usize {
                clash.extend(active.iter().filter(|a| a.mode == Mode::Permit));
            } else if span.mode != Mode::Permit {
                clash.extend(
                    active
                        .iter()
                        .filter(|a| a.mode == Mode::Permit && conflicts(a.mode, span.mode)),
                );
            }
            if !clash.is_empty() {
                clash.push(span);
                report(&name, &clash);
            }
            active.push(span);
        }
    }
}

fn spans(
    ix: &Indexed,
    interval: impl Fn(&OpView) -> Option<(u64, u64)>,
    names: impl Fn(&str) -> bool,
) -> BTreeMap<String, Vec<Span>> {
    let mut by_name: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for view in ix.ops.values() {
        let (Some((_, mode, tokens)), Some((start, end))) = (&view.acquired, interval(view)) else {
            continue;
        };
        for (name, _) in tokens.iter().filter(|(name, _)| names(name)) {
            by_name.entry(name.clone()).or_default().push(Span {
                start,
                end,
                mode: *mode,
                op: view.op,
            });
        }
    }
    by_name
}

fn violation(checker: &'static str, name: &str, clash: &[Span], why: &str) -> Violation {
    let start = clash.iter().map(|s| s.start).min().unwrap_or(0);
    let end = clash.iter().map(|s| s.end).max().unwrap_or(0);
    let holds: Vec<String> = clash
        .iter()
        .map(|s| format!("op {} ({:?})", s.op, s.mode))
        .collect();
    Violation {
        checker,
        what: format!("{name}: {why}: {}", holds.join(", ")),
        ops: clash.iter().map(|s| s.op).collect(),
        span: (start, end),
    }
}

/// (b): overlapping claims outside the unsafe windows, and re-entries that got another
/// token. Elections' terms are the [`leader`](super::leader) checker's.
pub fn exclusion(ix: &Indexed, records: &[Record]) -> Vec<Violation> {
    let not_election = |name: &str| !is_election(name);
    let mut out = claimed_at_once(ix, &ix.unsafe_windows, not_election, "exclusion");
    for r in records {
        if let Event::ReentryMismatch { outer, inner } = r.ev {
            out.push(Violation {
                checker: "exclusion",
                what: format!(
                    "re-entry of op {} got token {inner}, the outer hold has {outer}",
                    r.op
                ),
                ops: vec![r.op],
                span: (r.t, r.t),
            });
        }
    }
    out
}

/// Claims of the names `names` accepts that overlap in conflict, outside `windows`, as
/// violations of `checker`.
pub(crate) fn claimed_at_once(
    ix: &Indexed,
    windows: &[Window],
    names: impl Fn(&str) -> bool,
    checker: &'static str,
) -> Vec<Violation> {
    let mut out = Vec::new();
    sweep(spans(ix, OpView::claim, names), |name, clash| {
        let safe = clash.iter().all(|s| !in_windows(windows, (s.start, s.end)));
        if safe {
            out.push(violation(checker, name, clash, "holds claimed at once"));
        }
    });
    out
}

/// How long a force release's message to the holder it took the lock from may take, at
/// most, while nothing cuts the holder off (it takes milliseconds).
const TOLD_WITHIN: u64 = 1_000_000_000;

/// (c): holds used at once of which too many were never told, outside split-brain windows
/// (a Sentinel failover: the old master grants and releases as if alone until demoted),
/// and unless an operator's force release of the name met a fault of the controller: the
/// message that tells its holder can be lost with the connection, and the holder, still
/// within the lease Redis last confirmed, learns at its next renewal, which may come after
/// its hold ended (Valkey seed 7 in CI: a force release 0.8 ms before a proxy blackhole).
/// Elections' terms are the [`leader`](super::leader) checker's.
pub fn honesty(ix: &Indexed) -> Vec<Violation> {
    used_untold(ix, |name| !is_election(name), "honesty")
}

/// Holds of the names `names` accepts used at once in conflict and not told, as
/// violations of `checker`.
pub(crate) fn used_untold(
    ix: &Indexed,
    names: impl Fn(&str) -> bool,
    checker: &'static str,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let told = |op: u64| ix.ops.get(&op).is_some_and(|v| v.told.is_some());
    sweep(spans(ix, OpView::usage, names), |name, clash| {
        let untold: Vec<_> = clash.iter().copied().filter(|s| !told(s.op)).collect();
        let last = clash[clash.len() - 1];
        let too_many = if clash.iter().all(|s| s.mode == Mode::Permit) {
            untold.len() > SEMAPHORE.1 as usize
        } else {
            // The new hold and one it conflicts with (every other in `clash` does), untold.
            untold.len() >= 2 && untold.iter().any(|s| s.op == last.op)
        };
        let split = clash
            .iter()
            .any(|s| in_windows(&ix.split_windows, (s.start, s.end)));
        let forced_while_cut = ix.forced.get(name).is_some_and(|forced| {
            forced.iter().any(|&(start, end)| {
                clash.iter().any(|s| s.start <= end && start <= s.end)
                    && in_windows(&ix.fault_windows, (start, start + TOLD_WITHIN))
            })
        });
        if too_many && !split && !forced_while_cut {
            let why = "holds used at once and none told";
            out.push(violation(checker, name, clash, why));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(op: u64, mode: Mode, acquired: u64, held: &[u64], releasing: u64) -> OpView {
        OpView {
            op,
            acquired: Some((acquired, mode, vec![("n".into(), op)])),
            held: held.to_vec(),
            releasing: Some(releasing),
            last: releasing,
            ..OpView::default()
        }
    }

    fn indexed(views: Vec<OpView>) -> Indexed {
        Indexed {
            ops: views.into_iter().map(|v| (v.op, v)).collect(),
            ..Indexed::default()
        }
    }

    #[test]
    fn overlapping_exclusive_claims_are_violations_and_readers_are_not() {
        let ix = indexed(vec![
            view(1, Mode::Exclusive, 0, &[5], 10),
            view(2, Mode::Exclusive, 4, &[8], 12),
        ]);
        assert_eq!(exclusion(&ix, &[]).len(), 1);
        assert_eq!(honesty(&ix).len(), 1);
        let ix = indexed(vec![
            view(1, Mode::Read, 0, &[5], 10),
            view(2, Mode::Read, 4, &[8], 12),
        ]);
        assert!(exclusion(&ix, &[]).is_empty());
        let ix = indexed(vec![
            view(1, Mode::Read, 0, &[5], 10),
            view(2, Mode::Write, 4, &[8], 12),
        ]);
        assert_eq!(exclusion(&ix, &[]).len(), 1);
    }

    #[test]
    fn a_claim_ends_at_its_last_confirmation_and_told_holds_are_honest() {
        // Op 1 was confirmed only up to 3, then told at 6: no claim overlap with op 2 at 4.
        let mut first = view(1, Mode::Exclusive, 0, &[3], 10);
        first.told = Some(6);
        let ix = indexed(vec![first, view(2, Mode::Exclusive, 4, &[8], 12)]);
        assert!(exclusion(&ix, &[]).is_empty());
        assert!(honesty(&ix).is_empty());
    }

    #[test]
    fn permits_beyond_the_count_are_violations() {
        let permits = (1..=3)
            .map(|op| view(op, Mode::Permit, op, &[9], 10))
            .collect();
        assert_eq!(exclusion(&indexed(permits), &[]).len(), 1);
        let two = (1..=2)
            .map(|op| view(op, Mode::Permit, op, &[9], 10))
            .collect();
        assert!(exclusion(&indexed(two), &[]).is_empty());
    }

    /// A force release took op 1's hold and handed it to op 2; op 1 was never told. Honest
    /// when a fault of the controller began just after the force (the message to op 1 may
    /// be lost with its connection); a violation when nothing cut op 1 off, or when the
    /// fault came too late to swallow the message.
    #[test]
    fn a_force_release_met_by_a_fault_excuses_its_untold_holder() {
        let s = TOLD_WITHIN;
        let clash = || {
            indexed(vec![
                view(1, Mode::Exclusive, 0, &[5 * s], 10 * s),
                view(2, Mode::Exclusive, 4 * s, &[8 * s], 12 * s),
            ])
        };
        let mut ix = clash();
        ix.forced.insert("n".into(), vec![(4 * s, 5 * s)]);
        assert_eq!(honesty(&ix).len(), 1, "nothing cut the holder off");
        ix.fault_windows.push((4 * s + 1, 6 * s));
        assert!(honesty(&ix).is_empty());
        let mut late = clash();
        late.forced.insert("n".into(), vec![(4 * s, 5 * s)]);
        late.fault_windows.push((5 * s + 1, 6 * s));
        assert_eq!(
            honesty(&late).len(),
            1,
            "the message had a second to arrive"
        );
    }

    #[test]
    fn claims_inside_an_unsafe_window_are_not_exclusion_violations() {
        let mut ix = indexed(vec![
            view(1, Mode::Exclusive, 0, &[5], 10),
            view(2, Mode::Exclusive, 4, &[8], 12),
        ]);
        ix.unsafe_windows.push((2, 3));
        assert!(exclusion(&ix, &[]).is_empty());
    }
}
