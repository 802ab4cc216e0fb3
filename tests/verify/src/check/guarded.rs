//! (i) The guarded registers beside the locks (see [`crate::guarded`]): a write by a holder
//! that is no longer current must never land.
//!
//! * Every guarded write acknowledged as written has its op id in the register's final
//!   value, exactly once. A read-modify-write whose read and write both committed only
//!   while its hold was current cannot be overwritten by another's: a missing id is a write
//!   that landed without being the current holder's (or the lost update of the controls).
//! * The tokens in the register's log never go down: a lower token after a higher one is a
//!   write by a holder whose hold had ended.
//!
//! The register lives in the lock's Redis, so a fault that loses that Redis's data loses
//! it too: an acknowledged write is only judged when no such fault (a controller's unsafe
//! window, not an operator's force release) began after it was written.

use std::collections::{BTreeMap, HashMap};

use super::{in_windows, Violation, Window};
use crate::check::registers::Dump;
use crate::history::{Event, Outcome, Record};

/// Checks every register of `dumps` against `records`; `data_loss` are the windows whose
/// faults may lose the lock's Redis's data.
pub fn check(
    records: &[Record],
    dumps: &BTreeMap<String, Dump>,
    data_loss: &[Window],
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, dump) in dumps {
        let mut count: HashMap<u64, usize> = HashMap::new();
        for id in dump.value.split(',').filter_map(|s| s.parse().ok()) {
            *count.entry(id).or_default() += 1;
        }
        for r in records {
            let Event::Guarded {
                name: n,
                write: true,
                outcome: Outcome::Ok,
                ..
            } = &r.ev
            else {
                continue;
            };
            if n != name || in_windows(data_loss, (r.t, u64::MAX)) {
                continue;
            }
            let what = match count.get(&r.op).copied().unwrap_or(0) {
                1 => continue,
                0 => format!(
                    "acknowledged guarded write of op {} lost: overwritten by a write that \
                     was not the current holder's",
                    r.op
                ),
                n => format!(
                    "acknowledged guarded write of op {} appears {n} times",
                    r.op
                ),
            };
            out.push(violation(name, r.op, r.t, what));
        }
        let mut highest = 0;
        for &(token, op) in &dump.log {
            if token < highest {
                let what = format!(
                    "token {token} written after {highest}: a holder wrote after its hold ended"
                );
                out.push(violation(name, op, 0, what));
            }
            highest = highest.max(token);
        }
    }
    out
}

/// The guarded writes by outcome (`ok`, `fail:lost` — refused, the hold was not current —,
/// `info:…`), for the report.
pub fn outcomes(records: &[Record]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for r in records {
        if let Event::Guarded {
            write: true,
            outcome,
            ..
        } = &r.ev
        {
            let key = match outcome {
                Outcome::Ok => "ok".to_owned(),
                Outcome::Fail(why) => format!("fail:{why}"),
                Outcome::Info(_) => "info".to_owned(),
            };
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

fn violation(name: &str, op: u64, t: u64, what: String) -> Violation {
    Violation {
        checker: "guarded",
        what: format!("{name}: {what}"),
        ops: vec![op],
        span: (t, t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(t: u64, op: u64) -> Record {
        Record {
            t,
            p: 1,
            op,
            ev: Event::Guarded {
                name: "x0".to_owned(),
                token: op,
                write: true,
                sent: t - 1,
                outcome: Outcome::Ok,
            },
        }
    }

    fn dump(value: &str, log: &[(u64, u64)]) -> BTreeMap<String, Dump> {
        let dump = Dump {
            value: value.to_owned(),
            log: log.to_vec(),
        };
        BTreeMap::from([("x0".to_owned(), dump)])
    }

    #[test]
    fn a_lost_or_doubled_write_and_a_falling_token_are_violations() {
        let records = [write(10, 1), write(20, 2)];
        let clean = check(&records, &dump("1,2", &[(1, 1), (2, 2)]), &[]);
        assert!(clean.is_empty(), "{clean:?}");
        // A stale holder (token 1) wrote after op 2 and overwrote it.
        let stale = check(&records, &dump("1,1", &[(1, 1), (2, 2), (1, 1)]), &[]);
        let found: Vec<&str> = stale.iter().map(|v| v.what.as_str()).collect();
        assert_eq!(stale.len(), 3, "{found:?}");
        assert!(found.iter().any(|w| w.contains("op 2 lost")), "{found:?}");
        assert!(found.iter().any(|w| w.contains("2 times")), "{found:?}");
        assert!(found.iter().any(|w| w.contains("token 1 written after 2")));
    }

    #[test]
    fn a_write_before_a_data_loss_fault_is_not_judged() {
        let records = [write(10, 1), write(30, 2)];
        let found = check(&records, &dump("2", &[(2, 2)]), &[(20, 25)]);
        assert!(found.is_empty(), "{found:?}");
        let found = check(&records, &dump("1", &[(1, 1)]), &[(5, 8)]);
        assert_eq!(found.len(), 1, "{found:?}");
    }
}
