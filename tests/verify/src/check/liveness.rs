//! (d) Liveness: once the nemesis stops, every live client is granted a hold within
//! [`BOUND`]; and a lease after the clients stop, no lock key is left (checked by the
//! controller, passed in as `keys_left`).

use super::{Indexed, Violation};

/// Documented bounds this adds up: a wait ≤ 3 s, a dead holder blocks ≤ one lease (1 s), a
/// Sentinel client follows a new master within about a second, with room for a loaded
/// machine.
pub const BOUND: u64 = 15_000_000_000;

/// Checks the history after the nemesis, and the keys left.
pub fn check(ix: &Indexed, keys_left: &[String]) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(end) = ix.nemesis_end else {
        return out;
    };
    for (&p, &(_, killed)) in &ix.procs {
        if killed.is_some() {
            continue;
        }
        let first = ix
            .ops
            .values()
            .filter(|v| v.p == p && v.invoked >= end)
            .filter_map(|v| v.acquired.as_ref().map(|a| a.0))
            .min();
        match first {
            Some(t) if t - end <= BOUND => {}
            other => out.push(Violation {
                checker: "liveness",
                what: format!(
                    "client {p}: first grant after the nemesis {}",
                    other.map_or("never came".into(), |t| format!(
                        "after {:.1} s",
                        (t - end) as f64 / 1e9
                    ))
                ),
                ops: vec![],
                span: (end, end + BOUND),
            }),
        }
    }
    if !keys_left.is_empty() {
        out.push(Violation {
            checker: "liveness",
            what: format!(
                "{} keys left a lease after the end: {:?}",
                keys_left.len(),
                &keys_left[..keys_left.len().min(10)]
            ),
            ops: vec![],
            span: (0, 0),
        });
    }
    out
}
