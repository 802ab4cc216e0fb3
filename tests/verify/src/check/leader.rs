//! (e) One leader at a time: an election's term is an exclusive hold of its name, so the
//! exclusion sweep over the terms' claims (grant → last `is_leader()` confirmation),
//! outside the unsafe windows of the controller's faults (an operator's `force_release`
//! never touches an election), finds two leaders at once; and the honesty sweep over their
//! uses (grant → resignation sent) finds overlapping terms of which none was told (by
//! `lost()`, a false `is_leader()`, or a failed resignation). And `leader()`, read during
//! a term that was confirmed after the read, names that term.

use super::overlap::{claimed_at_once, used_untold};
use super::{in_windows, Indexed, Violation};
use crate::election::is_election;
use crate::history::{Event, Record};

/// The checker's name.
pub const CHECKER: &str = "leader";

/// Checks the elections' terms, and what `leader()` answered during them.
pub fn check(ix: &Indexed, records: &[Record]) -> Vec<Violation> {
    let mut out = claimed_at_once(ix, &ix.shared_windows, is_election, CHECKER);
    out.extend(used_untold(ix, is_election, CHECKER));
    out.extend(records.iter().filter_map(|r| misread(ix, r)));
    out
}

/// A `leader()` read inside a term's claim (the term confirmed after it) that named
/// another term or nobody.
fn misread(ix: &Indexed, r: &Record) -> Option<Violation> {
    let Event::LeaderRead { token } = r.ev else {
        return None;
    };
    let view = ix.ops.get(&r.op)?;
    let (_, _, tokens) = view.acquired.as_ref()?;
    let (name, own) = tokens.first()?;
    let (_, confirmed) = view.claim()?;
    let judged = confirmed >= r.t && !in_windows(&ix.shared_windows, (r.t, confirmed));
    (judged && token != Some(*own)).then(|| Violation {
        checker: CHECKER,
        what: format!(
            "{name}: leader() named term {token:?} during op {}'s term {own}",
            r.op
        ),
        ops: vec![r.op],
        span: (r.t, confirmed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::OpView;
    use crate::history::Mode;

    fn term(op: u64, name: &str, granted: u64, held: u64, resigned: u64) -> OpView {
        OpView {
            op,
            acquired: Some((granted, Mode::Exclusive, vec![(name.into(), op)])),
            held: vec![held],
            releasing: Some(resigned),
            last: resigned,
            ..OpView::default()
        }
    }

    #[test]
    fn two_leaders_at_once_fire_and_lock_holds_are_left_to_exclusion() {
        let ix = Indexed {
            ops: [
                term(1, "leader_e0", 0, 5, 10),
                term(2, "leader_e0", 4, 8, 12),
                term(3, "leader_e1", 0, 5, 10),
                term(4, "x0", 0, 5, 10),
                term(5, "x0", 4, 8, 12),
            ]
            .into_iter()
            .map(|v| (v.op, v))
            .collect(),
            ..Indexed::default()
        };
        let found = check(&ix, &[]);
        // One overlap of claims, one of untold uses, both on leader_e0 only.
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|v| v.what.starts_with("leader_e0")));
        assert_eq!(crate::check::overlap::exclusion(&ix, &[]).len(), 1);
    }

    #[test]
    fn a_leader_read_naming_another_term_inside_a_confirmed_term_fires() {
        let ix = Indexed {
            ops: [(3, term(3, "leader_e1", 2, 8, 10))].into(),
            ..Indexed::default()
        };
        let read = |t, token| Record {
            t,
            p: 1,
            op: 3,
            ev: Event::LeaderRead { token },
        };
        assert!(check(&ix, &[read(1, Some(3))]).is_empty());
        assert_eq!(check(&ix, &[read(1, Some(2))]).len(), 1);
        assert_eq!(check(&ix, &[read(1, None)]).len(), 1);
        // After the last confirmation the term may be over: not judged.
        assert!(check(&ix, &[read(9, Some(2))]).is_empty());
    }
}
