//! (a) The fenced registers against the history.
//!
//! * Every write acknowledged as accepted has its op id in the final value exactly once (a
//!   missing id is a lost update: a holder's read-modify-write overwritten by another's).
//! * No id twice, and no id the resource did not log as accepted.
//! * The tokens the resource accepted for a name never go down.
//! * Each register's reads and accepted writes are linearizable, checked with stateright's
//!   `LinearizabilityTester` over the register's value digests. The history is cut where no
//!   access to the name is in flight (the linearization of a prefix ends there), so each
//!   search stays small. A segment too long to search (or not linearizable) hands on the
//!   state the resource's own order gives: its write that comes last in the final value.

use std::collections::{BTreeMap, HashMap};

use stateright::semantics::register::{Register, RegisterOp, RegisterRet};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester};

use super::Violation;
use crate::history::{Event, Outcome, Record};
use crate::register::digest;

/// A register's final state as the resource holds it.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    /// The final value (`"op,op,…"`).
    pub value: String,
    /// Accepted writes in order: `(token, op)`.
    pub log: Vec<(u64, u64)>,
}

/// One access for the linearizability check: op `op` invoked at `start`, returned at `end`.
#[derive(Debug, Clone, Copy)]
struct Access {
    op: u64,
    start: u64,
    end: u64,
    write: bool,
    digest: u64,
}

/// Segments longer than this are not searched (reported as unchecked).
const MAX_SEGMENT: usize = 400;

/// What the register checker found.
#[derive(Debug, Default)]
pub struct Found {
    /// The violations.
    pub violations: Vec<Violation>,
    /// Accesses checked for linearizability.
    pub checked: usize,
    /// Accesses in segments too long to search.
    pub unchecked: usize,
}

/// Runs the checks for every register in `dumps`.
pub fn check(
    records: &[Record],
    dumps: &BTreeMap<String, Dump>,
    killed: &HashMap<u32, u64>,
) -> Found {
    let mut found = Found::default();
    for (name, dump) in dumps {
        let v = &mut found.violations;
        let ids: Vec<u64> = dump
            .value
            .split(',')
            .filter_map(|s| s.parse().ok())
            .collect();
        let mut count: HashMap<u64, usize> = HashMap::new();
        for id in &ids {
            *count.entry(*id).or_default() += 1;
        }
        let logged: HashMap<u64, u64> = dump.log.iter().map(|&(t, op)| (op, t)).collect();
        let mut acked = Vec::new();
        let mut accesses = Vec::new();
        let mut seen_writes = std::collections::HashSet::new();
        for r in records {
            let Event::Register {
                name: n,
                write,
                sent,
                digest,
                outcome,
                ..
            } = &r.ev
            else {
                continue;
            };
            if n != name {
                continue;
            }
            if *write {
                seen_writes.insert(r.op);
            }
            match outcome {
                Outcome::Ok => {
                    if *write {
                        acked.push((r.op, r.t));
                    }
                    accesses.push(Access {
                        op: r.op,
                        start: *sent,
                        end: r.t,
                        write: *write,
                        digest: *digest,
                    });
                }
                // Stale: refused, no effect. Unknown: settled from the resource's log below.
                Outcome::Fail(_) => {}
                Outcome::Info(_) => {
                    if *write && logged.contains_key(&r.op) {
                        accesses.push(Access {
                            op: r.op,
                            start: *sent,
                            end: u64::MAX,
                            write: true,
                            digest: *digest,
                        });
                    }
                }
            }
        }
        let acked_ops: std::collections::HashSet<u64> = acked.iter().map(|a| a.0).collect();
        for (op, t) in acked {
            match count.get(&op).copied().unwrap_or(0) {
                1 => {}
                0 => v.push(lost(name, op, t)),
                n => v.push(simple(
                    name,
                    op,
                    t,
                    format!("acknowledged write of op {op} appears {n} times"),
                )),
            }
        }
        for (&op, &n) in &count {
            if !logged.contains_key(&op) {
                v.push(simple(
                    name,
                    op,
                    0,
                    format!("op {op} is in the value but was never accepted"),
                ));
            } else if n > 1 && !acked_ops.contains(&op) {
                v.push(simple(name, op, 0, format!("op {op} appears {n} times")));
            }
        }
        let mut highest = 0;
        for &(token, op) in &dump.log {
            if token < highest {
                v.push(simple(
                    name,
                    op,
                    0,
                    format!("token {token} accepted after {highest}"),
                ));
            }
            highest = highest.max(token);
        }
        // Writes whose writer died before the answer: in the log, not in the history.
        for (&op, _) in logged.iter().filter(|(op, _)| !seen_writes.contains(op)) {
            let p = (op >> 32) as u32;
            let end = killed.get(&p).copied().unwrap_or(u64::MAX);
            let Some(pos) = ids.iter().position(|&id| id == op) else {
                continue;
            };
            let prefix: Vec<String> = ids[..=pos].iter().map(u64::to_string).collect();
            let start = unrecorded_write_start(records, op, name);
            accesses.push(Access {
                op,
                start,
                end,
                write: true,
                digest: digest(&prefix.join(",")),
            });
        }
        let order: HashMap<u64, usize> = ids.iter().enumerate().map(|(i, &op)| (op, i)).collect();
        linearizable(name, accesses, &order, &mut found);
    }
    found
}

/// The earliest moment a write of `op` to `name` that the history does not show can have
/// been sent: once the op's read of that register answered (every write is the second half
/// of a read-modify-write). Not the op's last event: an op whose hold was lost has its
/// body, and so a write in flight, dropped, and goes on to log `lost` and its completion
/// after the write reached the resource.
fn unrecorded_write_start(records: &[Record], op: u64, name: &str) -> u64 {
    let read_of = |r: &&Record| {
        r.op == op && matches!(&r.ev, Event::Register { name: n, write: false, .. } if n == name)
    };
    records.iter().rev().find(read_of).map_or(0, |r| r.t)
}

fn simple(name: &str, op: u64, t: u64, what: String) -> Violation {
    Violation {
        checker: "registers",
        what: format!("{name}: {what}"),
        ops: vec![op],
        span: (t, t),
    }
}

fn lost(name: &str, op: u64, t: u64) -> Violation {
    simple(
        name,
        op,
        t,
        format!(
            "acknowledged write of op {op} lost (overwritten by a concurrent read-modify-write)"
        ),
    )
}

/// Cuts the accesses where none is in flight and searches each segment; `order` is each
/// op's place in the register's final value (the order the resource applied the writes).
fn linearizable(
    name: &str,
    mut accesses: Vec<Access>,
    order: &HashMap<u64, usize>,
    found: &mut Found,
) {
    accesses.sort_by_key(|a| a.start);
    let mut state = digest("");
    let mut segment: Vec<Access> = Vec::new();
    let mut reach = 0;
    for access in accesses.into_iter().chain(std::iter::once(Access {
        op: 0,
        start: u64::MAX,
        end: u64::MAX,
        write: false,
        digest: 0,
    })) {
        if !segment.is_empty() && access.start > reach {
            state = search(name, &segment, state, order, found);
            segment.clear();
        }
        if access.start == u64::MAX {
            break;
        }
        reach = reach.max(access.end);
        segment.push(access);
    }
}

/// Searches one segment from `state`; returns the state after it. Unsearched or not
/// linearizable, the segment hands on the value after its write that comes last in
/// `order`, not after the one answered last: a write dropped in flight counts until its
/// writer's process ended, which may be long after the resource applied it (seed 742 of a
/// 480 s single-server run: a write applied at 9.8 s whose process was killed at 172 s
/// made one unsearched segment, and its stale value failed the next read).
fn search(
    name: &str,
    segment: &[Access],
    state: u64,
    order: &HashMap<u64, usize>,
    found: &mut Found,
) -> u64 {
    let fallback = segment
        .iter()
        .filter(|a| a.write)
        .max_by_key(|a| (order.get(&a.op).copied(), a.end))
        .map_or(state, |a| a.digest);
    if segment.len() > MAX_SEGMENT {
        found.unchecked += segment.len();
        return fallback;
    }
    found.checked += segment.len();
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, a) in segment.iter().enumerate() {
        events.push((a.start, false, i));
        if a.end != u64::MAX {
            events.push((a.end, true, i));
        }
    }
    events.sort();
    let mut tester = LinearizabilityTester::new(Register(state));
    for (_, is_return, i) in events {
        let a = segment[i];
        let result = if is_return {
            let ret = if a.write {
                RegisterRet::WriteOk
            } else {
                RegisterRet::ReadOk(a.digest)
            };
            tester.on_return(i, ret).map(|_| ())
        } else {
            let op = if a.write {
                RegisterOp::Write(a.digest)
            } else {
                RegisterOp::Read
            };
            tester.on_invoke(i, op).map(|_| ())
        };
        if result.is_err() {
            break;
        }
    }
    match tester.serialized_history() {
        Some(order) => order
            .iter()
            .rev()
            .find_map(|(op, _)| match op {
                RegisterOp::Write(d) => Some(*d),
                RegisterOp::Read => None,
            })
            .unwrap_or(state),
        None => {
            let span = (
                segment[0].start,
                segment
                    .iter()
                    .map(|a| a.end)
                    .filter(|&e| e != u64::MAX)
                    .max()
                    .unwrap_or(0),
            );
            found.violations.push(Violation {
                checker: "registers",
                what: format!("{name}: {} accesses not linearizable", segment.len()),
                ops: vec![],
                span,
            });
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(start: u64, end: u64, write: bool, value: &str) -> Access {
        Access {
            op: 0,
            start,
            end,
            write,
            digest: digest(value),
        }
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not_linearizable() {
        let mut found = Found::default();
        let ok = vec![
            access(0, 1, true, "1"),
            access(2, 3, false, "1"),
            access(4, 6, true, "1,2"),
            access(5, 7, false, "1"),
        ];
        linearizable("n", ok, &HashMap::new(), &mut found);
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        let stale = vec![
            access(0, 1, true, "1"),
            access(2, 3, true, "1,2"),
            access(4, 5, false, "1"),
        ];
        linearizable("n", stale, &HashMap::new(), &mut found);
        assert_eq!(found.violations.len(), 1);
    }

    /// A holder frozen right after sending its write loses its hold and has its body (the
    /// write in flight) dropped: the resource applied the write, the history never shows
    /// it, and the op logs `lost` later. The next holder's read of that value is
    /// linearizable: the unrecorded write may have been sent as soon as the op's read
    /// answered (seed 604 of the Redlock harness, before this was fixed, took the op's last
    /// event, `lost`, as its earliest send and reported the read).
    #[test]
    fn a_write_dropped_in_flight_counts_from_its_read() {
        let (a, b) = ((1u64 << 32) | 1, (2u64 << 32) | 1);
        let access = |t: u64, op: u64, token: u64, write: bool, value: &str| Record {
            t,
            p: (op >> 32) as u32,
            op,
            ev: Event::Register {
                name: "x".to_owned(),
                token,
                write,
                sent: t - 1,
                digest: digest(value),
                outcome: Outcome::Ok,
            },
        };
        let (only_a, both) = (a.to_string(), format!("{a},{b}"));
        let mut records = vec![
            access(10, a, 5, false, ""),
            access(30, b, 7, false, &only_a),
            access(40, b, 7, true, &both),
            Record {
                t: 50,
                p: 1,
                op: a,
                ev: Event::Lost,
            },
        ];
        let dumps = BTreeMap::from([(
            "x".to_owned(),
            Dump {
                value: both.clone(),
                log: vec![(5, a), (7, b)],
            },
        )]);
        let found = check(&records, &dumps, &HashMap::new());
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        // Control: a read of that value before the op's own read answered is not.
        records[1] = access(8, b, 7, false, &only_a);
        let found = check(&records, &dumps, &HashMap::new());
        assert_eq!(found.violations.len(), 1, "{:?}", found.violations);
    }

    /// A segment too long to search hands on the value the resource's order gives. Op 1's
    /// write was dropped in flight (unrecorded: it counts until its process was killed, long
    /// after), then 200 ops read and wrote after it, one segment of 401 accesses: a read
    /// after it of the value the 200th write left is linearizable, and a read of the value
    /// op 1 left is not (its write answered last, but the resource applied it first).
    #[test]
    fn an_unsearched_segment_hands_on_the_value_in_the_resources_order() {
        let value = |ops: u64| {
            (1..=ops)
                .map(|op| op.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let order: HashMap<u64, usize> = (1..=201).map(|op| (op, op as usize - 1)).collect();
        let mut accesses = vec![Access {
            op: 1,
            start: 10,
            end: 100_000,
            write: true,
            digest: digest(&value(1)),
        }];
        for op in 2..=201u64 {
            let t = 100 + op * 10;
            accesses.push(Access {
                op,
                start: t,
                end: t + 1,
                write: false,
                digest: digest(&value(op - 1)),
            });
            accesses.push(Access {
                op,
                start: t + 2,
                end: t + 3,
                write: true,
                digest: digest(&value(op)),
            });
        }
        let read = |digest| Access {
            op: 202,
            start: 200_000,
            end: 200_001,
            write: false,
            digest,
        };
        let mut found = Found::default();
        let mut fresh = accesses.clone();
        fresh.push(read(digest(&value(201))));
        linearizable("x", fresh, &order, &mut found);
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        assert_eq!((found.unchecked, found.checked), (401, 1));
        // Control: the value op 1 left, read after everything, is stale.
        accesses.push(read(digest(&value(1))));
        linearizable("x", accesses, &order, &mut found);
        assert_eq!(found.violations.len(), 1, "{:?}", found.violations);
    }
}
