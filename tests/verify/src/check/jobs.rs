//! (f) Scheduled jobs: each fire runs at most once while `hold_at_least` covers the skew.
//!
//! A fire that ran holds its name from its grant (before its body's `JobRan`) until at
//! least `HOLD_AT_LEAST` after its invocation (the minimum counts from the body's start,
//! and `hold_at_most` is longer). So two runs A and B of one fire certainly held the name
//! at once when A ran before B's invocation + `HOLD_AT_LEAST` and B ran before A's — a
//! fire run twice although the later instance was behind by less than the minimum. A run
//! whose process was paused past that (an instance far behind) is no violation. Runs near
//! an unsafe window of the controller's faults (data lost, a failover) are not judged.

use std::collections::BTreeMap;

use super::{in_windows, Violation};
use crate::history::{Event, Record};
use crate::jobs::HOLD_AT_LEAST;

/// The checker's name.
pub const CHECKER: &str = "jobs";
/// Room for Redis' millisecond expiry and its clock against the monotonic one.
const SLACK: u64 = 50_000_000;

/// One run of a fire: its op, when it was invoked and when its body started.
#[derive(Debug, Clone, Copy)]
struct Run {
    op: u64,
    invoked: u64,
    ran: u64,
}

/// Checks every fire's runs; `unsafe_windows` as [`Indexed`](super::Indexed) has them.
pub fn check(records: &[Record], unsafe_windows: &[super::Window]) -> Vec<Violation> {
    let mut invoked: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    let mut runs: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for r in records {
        match &r.ev {
            Event::Invoke { kind, names } if kind == "job" => {
                invoked.insert(r.op, (names[0].clone(), r.t));
            }
            Event::JobRan { .. } => {
                if let Some((name, at)) = invoked.get(&r.op) {
                    runs.entry(name.clone()).or_default().push(Run {
                        op: r.op,
                        invoked: *at,
                        ran: r.t,
                    });
                }
            }
            _ => {}
        }
    }
    let least = HOLD_AT_LEAST.as_nanos() as u64;
    let mut out = Vec::new();
    for (name, runs) in runs {
        let judged: Vec<Run> = runs
            .into_iter()
            .filter(|r| !in_windows(unsafe_windows, (r.invoked, r.invoked + least)))
            .collect();
        let held_at_once = |a: &Run, b: &Run| a.ran + SLACK < b.invoked + least;
        let twice = judged.iter().enumerate().find_map(|(i, a)| {
            let b = judged[i + 1..]
                .iter()
                .find(|b| held_at_once(a, b) && held_at_once(b, a))?;
            Some((*a, *b))
        });
        if let Some((a, b)) = twice {
            out.push(Violation {
                checker: CHECKER,
                what: format!(
                    "{name} ran twice within hold_at_least: op {} and op {} ({:.0} ms apart)",
                    a.op,
                    b.op,
                    a.ran.abs_diff(b.ran) as f64 / 1e6
                ),
                ops: vec![a.op, b.op],
                span: (a.invoked.min(b.invoked), a.ran.max(b.ran)),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn fire(op: u64, name: &str, invoked: u64, ran: u64) -> [Record; 2] {
        let kind = "job".to_owned();
        let names = vec![name.to_owned()];
        let rec = |t, ev| Record { t, p: 1, op, ev };
        [
            rec(invoked, Event::Invoke { kind, names }),
            rec(ran, Event::JobRan { token: op }),
        ]
    }

    fn history(fires: &[(u64, &str, u64, u64)]) -> Vec<Record> {
        let mut records: Vec<Record> = fires
            .iter()
            .flat_map(|&(op, name, invoked, ran)| fire(op, name, invoked * MS, ran * MS))
            .collect();
        records.sort_by_key(|r| r.t);
        records
    }

    #[test]
    fn a_fire_run_twice_within_the_minimum_fires_and_a_late_instance_does_not() {
        let twice = history(&[(1, "job_5", 0, 10), (2, "job_5", 200, 205)]);
        assert_eq!(check(&twice, &[]).len(), 1);
        // Both invoked before either ran: still one hold inside the other's minimum.
        let racing = history(&[(1, "job_5", 0, 10), (2, "job_5", 5, 15)]);
        assert_eq!(check(&racing, &[]).len(), 1);
        // The second instance was 1.5 s behind (a paused process): allowed.
        let late = history(&[(1, "job_5", 0, 10), (2, "job_5", 1500, 1505)]);
        assert!(check(&late, &[]).is_empty());
        // Different fires, or inside an unsafe window: not judged together.
        let other = history(&[(1, "job_5", 0, 10), (2, "job_6", 200, 205)]);
        assert!(check(&other, &[]).is_empty());
        assert!(check(&twice, &[(100 * MS, 300 * MS)]).is_empty());
    }
}
