//! (g) Idempotency keys: each key's effect completed at most once within the retention.
//!
//! * No request ran (its `begin` answered `Run`) after another's `complete` of the same key
//!   was acknowledged, while that record was surely retained (its retention counts from no
//!   earlier than the moment `complete` was sent): the key must replay.
//! * Of the effects the fenced register accepted for a key, at most one is of a request
//!   whose `complete` was acknowledged. More accepted effects are allowed only from
//!   requests that were told they did not complete (a lost hold, a request given up).
//!
//! Both are judged only away from the unsafe windows (a restart with the data gone loses
//! the record as it loses the lock).

use std::collections::{BTreeMap, HashSet};

use super::registers::Dump;
use super::{in_windows, Violation, Window};
use crate::history::{Event, Outcome, Record};
use crate::idempotency::RETENTION;

/// The checker's name.
pub const CHECKER: &str = "idempotency";
/// Room for Redis' expiry clock against the monotonic one.
pub(crate) const SLACK: u64 = 100_000_000;

/// What the history says about one request with a key (also built by the HTTP checker,
/// one per handler run).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Request {
    pub(crate) op: u64,
    pub(crate) invoked: u64,
    /// When `begin` answered `Run`.
    pub(crate) ran: Option<u64>,
    /// `complete` acknowledged: (sent — the record's retention counts from no earlier —,
    /// acknowledged).
    pub(crate) completed: Option<(u64, u64)>,
    pub(crate) last: u64,
}

/// Checks every key; `dumps` has the keys' registers, `unsafe_windows` as
/// [`Indexed`](super::Indexed) has them.
pub fn check(
    records: &[Record],
    dumps: &BTreeMap<String, Dump>,
    unsafe_windows: &[Window],
) -> Vec<Violation> {
    let mut key_of: BTreeMap<u64, String> = BTreeMap::new();
    let mut by_key: BTreeMap<String, BTreeMap<u64, Request>> = BTreeMap::new();
    for r in records {
        if let Event::Invoke { kind, names } = &r.ev {
            if kind == "idempotent" {
                key_of.insert(r.op, names[0].clone());
            }
        }
        let Some(key) = key_of.get(&r.op) else {
            continue;
        };
        let request = by_key
            .entry(key.clone())
            .or_default()
            .entry(r.op)
            .or_insert(Request {
                op: r.op,
                invoked: r.t,
                ..Request::default()
            });
        request.last = r.t;
        match &r.ev {
            Event::InFlight { .. } => request.ran = Some(r.t),
            Event::Completed {
                sent,
                outcome: Outcome::Ok,
            } => request.completed = Some((*sent, r.t)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (key, requests) in by_key {
        let accepted: HashSet<u64> = dumps
            .get(&key)
            .map(|d| d.log.iter().map(|&(_, op)| op).collect())
            .unwrap_or_default();
        out.extend(check_key(
            CHECKER,
            &key,
            &requests,
            &accepted,
            unsafe_windows,
        ));
    }
    out
}

/// Both checks over one key's requests (`accepted`: the ops whose effect its register
/// accepted); the violations are `checker`'s.
pub(crate) fn check_key(
    checker: &'static str,
    key: &str,
    requests: &BTreeMap<u64, Request>,
    accepted: &HashSet<u64>,
    unsafe_windows: &[Window],
) -> Vec<Violation> {
    let retention = RETENTION.as_nanos() as u64;
    let mut out = Vec::new();
    let judged = |a: &Request, b: &Request| {
        let span = (a.invoked.min(b.invoked), a.last.max(b.last));
        !in_windows(unsafe_windows, span)
    };
    let done: Vec<&Request> = requests
        .values()
        .filter(|r| r.completed.is_some())
        .collect();
    // A run after an acknowledged completion, while its record was retained.
    let again = done.iter().find_map(|a| {
        let (sent, acked) = a.completed?;
        let b = requests.values().find(|b| {
            b.op != a.op
                && b.invoked >= acked
                && b.ran.is_some_and(|ran| ran + SLACK < sent + retention)
                && judged(a, b)
        })?;
        Some((a.op, b.op))
    });
    if let Some((a, b)) = again {
        let what = format!("{key}: op {b} ran after op {a} completed it");
        out.push(violation(checker, requests, what, a, b));
    }
    // Two completed effects, the later begun while the earlier's record was retained.
    let effects: Vec<Request> = done
        .iter()
        .filter(|r| accepted.contains(&r.op))
        .map(|r| **r)
        .collect();
    let twice = effects.iter().enumerate().find_map(|(i, a)| {
        let b = effects[i + 1..].iter().find(|b| {
            let (first, second) = if a.completed <= b.completed {
                (a, *b)
            } else {
                (*b, a)
            };
            let (sent, _) = first.completed.expect("completed");
            second.ran.is_some_and(|ran| ran + SLACK < sent + retention) && judged(a, b)
        })?;
        Some((a.op, b.op))
    });
    if let Some((a, b)) = twice {
        let what = format!("{key}: effects of op {a} and op {b} both accepted and completed");
        out.push(violation(checker, requests, what, a, b));
    }
    out
}

fn violation(
    checker: &'static str,
    requests: &BTreeMap<u64, Request>,
    what: String,
    a: u64,
    b: u64,
) -> Violation {
    let (ra, rb) = (requests[&a], requests[&b]);
    Violation {
        checker,
        what,
        ops: vec![a, b],
        span: (ra.invoked.min(rb.invoked), ra.last.max(rb.last)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A request of key `k`: invoked at `at`, run at `at + 1` when `ran`, completed
    /// (sent at `at + 2`, acknowledged at `at + 3`) when `completed`.
    fn request(op: u64, at: u64, ran: bool, completed: bool) -> Vec<Record> {
        let rec = |t: u64, ev| Record {
            t: t * MS,
            p: 1,
            op,
            ev,
        };
        let mut out = vec![rec(
            at,
            Event::Invoke {
                kind: "idempotent".into(),
                names: vec!["k".into()],
            },
        )];
        if ran {
            out.push(rec(at + 1, Event::InFlight { token: op }));
        } else {
            out.push(rec(at + 1, Event::Replayed));
        }
        if completed {
            let sent = (at + 2) * MS;
            let outcome = Outcome::Ok;
            out.push(rec(at + 3, Event::Completed { sent, outcome }));
        }
        out
    }

    fn dumps(ops: &[u64]) -> BTreeMap<String, Dump> {
        let log = ops.iter().map(|&op| (op, op)).collect();
        [(
            "k".to_owned(),
            Dump {
                value: String::new(),
                log,
            },
        )]
        .into()
    }

    #[test]
    fn a_key_run_again_after_it_completed_fires() {
        let mut records = request(1, 0, true, true);
        records.extend(request(2, 10, false, false));
        assert!(check(&records, &dumps(&[1]), &[]).is_empty());
        // Run again (and completed again) 10 ms after the completion: both checks fire.
        let mut records = request(1, 0, true, true);
        records.extend(request(2, 10, true, true));
        assert_eq!(check(&records, &dumps(&[1, 2]), &[]).len(), 2);
        // Past the retention, a key runs again legitimately.
        let late = RETENTION.as_millis() as u64 + 1000;
        let mut records = request(1, 0, true, true);
        records.extend(request(2, late, true, true));
        assert!(check(&records, &dumps(&[1, 2]), &[]).is_empty());
    }

    #[test]
    fn an_effect_of_a_request_that_did_not_complete_is_allowed() {
        // Op 1 wrote, lost its hold and was told (no acknowledged completion); op 2 ran.
        let mut records = request(1, 0, true, false);
        records.extend(request(2, 10, true, true));
        assert!(check(&records, &dumps(&[1, 2]), &[]).is_empty());
        // Inside an unsafe window (the record lost with the data): not judged.
        let mut records = request(1, 0, true, true);
        records.extend(request(2, 10, true, true));
        assert!(check(&records, &dumps(&[1, 2]), &[(5 * MS, 6 * MS)]).is_empty());
    }
}
