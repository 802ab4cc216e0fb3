//! (e) One leader at a time: an election's term is an exclusive hold of its name, so the
//! exclusion sweep over the terms' claims (grant → last `is_leader()` confirmation),
//! outside the unsafe windows, finds two leaders at once; and the honesty sweep over their
//! uses (grant → resignation sent) finds overlapping terms of which none was told (by
//! `lost()`, a false `is_leader()`, or a failed resignation).

use super::overlap::{claimed_at_once, used_untold};
use super::{Indexed, Violation};
use crate::election::is_election;

/// The checker's name.
pub const CHECKER: &str = "leader";

/// Checks the elections' terms.
pub fn check(ix: &Indexed) -> Vec<Violation> {
    let mut out = claimed_at_once(ix, is_election, CHECKER);
    out.extend(used_untold(ix, is_election, CHECKER));
    out
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
        let found = check(&ix);
        // One overlap of claims, one of untold uses, both on leader_e0 only.
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|v| v.what.starts_with("leader_e0")));
        assert_eq!(crate::check::overlap::exclusion(&ix, &[]).len(), 1);
    }
}
