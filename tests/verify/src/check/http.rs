//! (h) lock-tower's idempotency layer over HTTP, per key (`http_<epoch>_<k>`):
//!
//! * **one effect**: the key's fenced register accepted at most one effect (the handler
//!   writes only into an empty register, with the in-flight hold's token, so a cancelled,
//!   crashed or superseded run leaves no second one);
//! * **answers**: every `2xx` is the handler's `201`, names this key and an effect the
//!   register accepted, all of them the same one; a fresh (not replayed) one comes from the
//!   run that served that very request;
//! * **one stored response**: no two replays carry responses of different runs while the
//!   first run's record was surely retained;
//! * **no run after a completion** within the retention, with (g)'s check: a completion is
//!   known from a replay of the run's response, or from its fresh `2xx` when no fault of
//!   the nemesis came near it (the layer answers `2xx` without storing only when Redis
//!   failed it at the store);
//! * **statuses**: only `201`, `409` and the documented `503`s (Redis unreachable, the key
//!   lost while the handler ran, the handler's own "superseded" and "resource down"); never
//!   a `422` (every retry carries the same body), nor any other status.
//!
//! The first four are judged outside the unsafe windows of the nemesis' faults, as (g);
//! statuses everywhere.

use std::collections::{BTreeMap, HashSet};

use super::idempotency::{check_key, Request, SLACK};
use super::registers::Dump;
use super::{in_windows, Indexed, Violation, Window};
use crate::history::{Event, Record};
use crate::http::{HandlerBody, RESOURCE_DOWN, SUPERSEDED};
use crate::idempotency::RETENTION;

/// The checker's name.
pub const CHECKER: &str = "http";

/// The `503` texts lock-tower's layer documents: Redis unreachable; the key lost while the
/// handler ran.
const LAYER_503: [&str; 2] = [
    "idempotency keys are unavailable",
    "the request lost its idempotency key while it ran; nothing was stored",
];

/// One answered request.
#[derive(Debug, Clone)]
struct Answer {
    op: u64,
    invoked: u64,
    at: u64,
    status: u16,
    replayed: bool,
    body: String,
}

/// What the history says about one key.
#[derive(Debug, Default)]
struct Key {
    answers: Vec<Answer>,
    /// Handler runs, as (g) sees requests.
    runs: BTreeMap<u64, Request>,
    /// Run → the request it served.
    served: BTreeMap<u64, u64>,
}

/// Checks every HTTP key; `dumps` has the keys' registers.
pub fn check(records: &[Record], dumps: &BTreeMap<String, Dump>, ix: &Indexed) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, key) in keys(records) {
        let accepted: Vec<u64> = dumps
            .get(&name)
            .map(|d| d.log.iter().map(|&(_, op)| op).collect())
            .unwrap_or_default();
        let judge = Judge {
            name: &name,
            key: &key,
            accepted: &accepted,
            unsafe_windows: &ix.shared_windows,
        };
        out.extend(judge.statuses());
        out.extend(judge.one_effect());
        out.extend(judge.answers());
        out.extend(judge.one_stored());
        let runs = judge.completions(&ix.fault_windows);
        let accepted: HashSet<u64> = accepted.iter().copied().collect();
        out.extend(check_key(
            CHECKER,
            &name,
            &runs,
            &accepted,
            &ix.shared_windows,
        ));
    }
    out
}

fn keys(records: &[Record]) -> BTreeMap<String, Key> {
    // op → (key, invoked, is a handler run)
    let mut ops: BTreeMap<u64, (String, u64, bool)> = BTreeMap::new();
    let mut keys: BTreeMap<String, Key> = BTreeMap::new();
    for r in records {
        if let Event::Invoke { kind, names } = &r.ev {
            if kind == "http" || kind == "http_run" {
                ops.insert(r.op, (names[0].clone(), r.t, kind == "http_run"));
            }
        }
        let Some((name, invoked, is_run)) = ops.get(&r.op) else {
            continue;
        };
        let key = keys.entry(name.clone()).or_default();
        if *is_run {
            let run = key.runs.entry(r.op).or_insert(Request {
                op: r.op,
                invoked: *invoked,
                ..Request::default()
            });
            run.last = r.t;
            if let Event::HttpRun { request, .. } = &r.ev {
                run.ran = Some(r.t);
                key.served.insert(r.op, *request);
            }
        } else if let Event::HttpAnswer {
            status,
            replayed,
            body,
        } = &r.ev
        {
            key.answers.push(Answer {
                op: r.op,
                invoked: *invoked,
                at: r.t,
                status: *status,
                replayed: *replayed,
                body: body.clone(),
            });
        }
    }
    keys
}

/// One key's history, its register's accepted effects, and the windows it is not judged in.
struct Judge<'a> {
    name: &'a str,
    key: &'a Key,
    accepted: &'a [u64],
    unsafe_windows: &'a [Window],
}

impl Judge<'_> {
    fn violation(&self, what: String, ops: Vec<u64>, span: (u64, u64)) -> Violation {
        Violation {
            checker: CHECKER,
            what: format!("{}: {what}", self.name),
            ops,
            span,
        }
    }

    fn judged(&self, span: (u64, u64)) -> bool {
        !in_windows(self.unsafe_windows, span)
    }

    /// The `2xx` answers with their parsed bodies (those that parse).
    fn successes(&self) -> impl Iterator<Item = (&Answer, HandlerBody)> {
        self.key
            .answers
            .iter()
            .filter(|a| (200..300).contains(&a.status))
            .filter_map(|a| Some((a, HandlerBody::parse(&a.body)?)))
    }

    fn statuses(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for a in &self.key.answers {
            let text = a.body.trim_end();
            let wrong = match a.status {
                201 => HandlerBody::parse(text)
                    .is_none_or(|b| b.key != self.name)
                    .then(|| format!("a 201 with the body {text:?}")),
                200..300 => Some(format!("a {} (the handler answers 201)", a.status)),
                409 => None,
                422 => Some("a 422 for a retry with the same body".to_owned()),
                503 if LAYER_503.contains(&text) || [SUPERSEDED, RESOURCE_DOWN].contains(&text) => {
                    None
                }
                status => Some(format!("an undocumented {status}: {text:?}")),
            };
            if let Some(wrong) = wrong {
                let what = format!("request op {} got {wrong}", a.op);
                out.push(self.violation(what, vec![a.op], (a.invoked, a.at)));
            }
        }
        out
    }

    fn one_effect(&self) -> Option<Violation> {
        if self.accepted.len() < 2 {
            return None;
        }
        let runs = self.accepted.iter().filter_map(|op| self.key.runs.get(op));
        let span = runs.fold((u64::MAX, 0), |(a, b), r| (a.min(r.invoked), b.max(r.last)));
        let span = if span.0 > span.1 { (0, u64::MAX) } else { span };
        let what = format!(
            "{} effects accepted (runs {:?})",
            self.accepted.len(),
            self.accepted
        );
        self.judged(span)
            .then(|| self.violation(what, self.accepted.to_vec(), span))
    }

    fn answers(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut first: Option<(&Answer, u64)> = None;
        for (a, body) in self.successes() {
            if !self.accepted.contains(&body.effect) {
                let what = format!(
                    "request op {} was answered for effect {}, which the register never accepted",
                    a.op, body.effect
                );
                out.push(self.violation(what, vec![a.op, body.effect], (a.invoked, a.at)));
            }
            let served = self.key.served.get(&body.run);
            if !a.replayed && served.is_some_and(|&request| request != a.op) {
                let what = format!(
                    "request op {} got a fresh answer of run {}, which served another request",
                    a.op, body.run
                );
                out.push(self.violation(what, vec![a.op, body.run], (a.invoked, a.at)));
            }
            match first {
                None => first = Some((a, body.effect)),
                Some((f, effect)) if effect != body.effect => {
                    let span = (f.invoked.min(a.invoked), f.at.max(a.at));
                    if self.judged(span) {
                        let what = format!(
                            "request ops {} and {} were answered for effects {effect} and {}",
                            f.op, a.op, body.effect
                        );
                        out.push(self.violation(what, vec![f.op, a.op], span));
                    }
                }
                Some(_) => {}
            }
        }
        out
    }

    /// Replays of responses of two runs, the later one while the earlier run's record was
    /// surely retained (stored no earlier than its run began).
    fn one_stored(&self) -> Option<Violation> {
        let retention = RETENTION.as_nanos() as u64;
        let replays: Vec<(&Answer, HandlerBody)> =
            self.successes().filter(|(a, _)| a.replayed).collect();
        for (i, (a, x)) in replays.iter().enumerate() {
            for (b, y) in &replays[i + 1..] {
                if x.run == y.run {
                    continue;
                }
                let began = [x.run, y.run]
                    .iter()
                    .filter_map(|run| self.key.runs.get(run)?.ran)
                    .min();
                let Some(began) = began else {
                    continue;
                };
                let span = (a.invoked.min(b.invoked), a.at.max(b.at));
                if span.1 + SLACK < began + retention && self.judged(span) {
                    let what = format!(
                        "request ops {} and {} got replays of different responses ({:?}, {:?})",
                        a.op, b.op, a.body, b.body
                    );
                    return Some(self.violation(what, vec![a.op, b.op], span));
                }
            }
        }
        None
    }

    /// The runs, each completed when a replay carried its response, or its fresh `2xx`
    /// came back with no fault near (from the run's start to the answer).
    fn completions(&self, faults: &[Window]) -> BTreeMap<u64, Request> {
        let mut runs = self.key.runs.clone();
        for (a, body) in self.successes() {
            let Some(run) = runs.get_mut(&body.run) else {
                continue;
            };
            let Some(ran) = run.ran else {
                continue;
            };
            if !a.replayed && in_windows(faults, (ran, a.at)) {
                continue;
            }
            let acked = run.completed.map_or(a.at, |(_, at)| at.min(a.at));
            run.completed = Some((ran, acked));
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::index;
    use crate::http::key_name;

    const MS: u64 = 1_000_000;

    /// Builds a crafted history of one key.
    struct History {
        records: Vec<Record>,
        key: String,
        log: Vec<(u64, u64)>,
        /// Sentinel switches' windows (ms), as `check::switches` reads them.
        switches: Vec<Window>,
    }

    impl History {
        fn new() -> Self {
            Self {
                records: Vec::new(),
                key: key_name(1, 0),
                log: Vec::new(),
                switches: Vec::new(),
            }
        }

        fn at(&mut self, t: u64, p: u32, op: u64, ev: Event) {
            self.records.push(Record {
                t: t * MS,
                p,
                op,
                ev,
            });
        }

        /// Handler run `op` serving `request` from `t` to `t + 5`; `writes`: its effect
        /// accepted.
        fn run(&mut self, op: u64, request: u64, t: u64, writes: bool) -> &mut Self {
            let names = vec![self.key.clone()];
            let kind = "http_run".to_owned();
            self.at(t, 2, op, Event::Invoke { kind, names });
            let token = op;
            self.at(t, 2, op, Event::HttpRun { request, token });
            if writes {
                self.log.push((op, op));
            }
            let outcome = crate::history::Outcome::Ok;
            self.at(t + 5, 2, op, Event::Complete { outcome });
            self
        }

        /// Request `op` sent at `t`, answered at `t + 10`.
        fn answer(
            &mut self,
            op: u64,
            t: u64,
            status: u16,
            replayed: bool,
            body: &str,
        ) -> &mut Self {
            let names = vec![self.key.clone()];
            let kind = "http".to_owned();
            self.at(t, 1, op, Event::Invoke { kind, names });
            let body = body.to_owned();
            let answer = Event::HttpAnswer {
                status,
                replayed,
                body,
            };
            self.at(t + 10, 1, op, answer);
            self
        }

        fn body(&self, effect: u64, run: u64) -> String {
            let key = self.key.clone();
            HandlerBody { effect, run, key }.render()
        }

        fn fault(&mut self, from: u64, to: u64) -> &mut Self {
            let fault = "client-pause".to_owned();
            let start = Event::FaultStart {
                fault: fault.clone(),
                unsafe_for_exclusion: false,
                split_brain: false,
            };
            self.at(from, 0, 0, start);
            self.at(to, 0, 0, Event::FaultEnd { fault });
            self
        }

        fn check(&mut self) -> Vec<String> {
            self.records.sort_by_key(|r| r.t);
            let mut ix = index(&self.records, 0);
            let switches: Vec<Window> = (self.switches.iter())
                .map(|&(a, b)| (a * MS, b * MS))
                .collect();
            ix.add_split(&switches);
            let dump = Dump {
                value: String::new(),
                log: self.log.clone(),
            };
            let dumps = [(self.key.clone(), dump)].into();
            check(&self.records, &dumps, &ix)
                .into_iter()
                .map(|v| v.what)
                .collect()
        }
    }

    /// Run 100 serves request 1 and writes; request 2 is told 409, request 3 gets a replay.
    fn clean() -> History {
        let mut h = History::new();
        let fresh = h.body(100, 100);
        h.run(100, 1, 0, true)
            .answer(1, 0, 201, false, &fresh)
            .answer(
                2,
                1,
                409,
                false,
                "a request with this idempotency key is in flight\n",
            )
            .answer(3, 50, 201, true, &fresh);
        h
    }

    /// The seed-723 Sentinel run: run 100's response was stored on a master the Sentinels
    /// then switched away from (to one that had stopped replicating); run 101 served a later
    /// request on the new master, and a client still on the old one replayed run 100's. Not
    /// judged within the switch's window; judged (a violation) without it.
    #[test]
    fn replays_across_a_sentinel_switch_are_not_judged() {
        let mut h = History::new();
        let (first, second) = (h.body(100, 100), h.body(100, 101));
        h.run(100, 1, 0, true)
            .answer(1, 0, 201, false, &first)
            .run(101, 4, 1150, false)
            .answer(4, 1150, 201, false, &second)
            .answer(3, 1200, 201, true, &first)
            .answer(5, 1400, 201, true, &second);
        assert!(!h.check().is_empty(), "no window: a violation");
        h.switches.push((1000, 1500));
        assert_eq!(h.check(), Vec::<String>::new());
    }

    #[test]
    fn a_clean_key_passes() {
        assert_eq!(clean().check(), Vec::<String>::new());
        // Run 100 wrote, its client timed out (no answer); run 101 answers for its effect,
        // and later duplicates get run 101's response; 503s as documented.
        let mut h = History::new();
        let later = h.body(100, 101);
        h.run(100, 1, 0, true)
            .run(101, 4, 20, false)
            .answer(4, 20, 201, false, &later)
            .answer(5, 30, 503, false, "idempotency keys are unavailable\n")
            .answer(6, 31, 503, false, SUPERSEDED)
            .answer(7, 40, 201, true, &later);
        assert_eq!(h.check(), Vec::<String>::new());
    }

    #[test]
    fn a_second_accepted_effect_fires() {
        let mut h = clean();
        let second = h.body(101, 101);
        h.run(101, 4, 20, true).answer(4, 20, 201, false, &second);
        let found = h.check();
        assert!(
            found.iter().any(|v| v.contains("2 effects accepted")),
            "{found:?}"
        );
        assert!(found
            .iter()
            .any(|v| v.contains("answered for effects 100 and 101")));
    }

    #[test]
    fn a_replay_of_another_response_or_effect_fires() {
        let mut h = clean();
        let other = h.body(100, 101);
        h.run(101, 9, 5, false).answer(4, 60, 201, true, &other);
        let found = h.check();
        assert!(
            found
                .iter()
                .any(|v| v.contains("replays of different responses")),
            "{found:?}"
        );
        let mut h = clean();
        let ghost = h.body(555, 100);
        h.answer(4, 60, 201, true, &ghost);
        let found = h.check();
        assert!(
            found.iter().any(|v| v.contains("never accepted")),
            "{found:?}"
        );
    }

    #[test]
    fn a_run_after_a_completion_fires_within_the_retention_only() {
        // After the replay at 60 ms: within the retention, a violation.
        let mut h = clean();
        let again = h.body(100, 101);
        h.run(101, 4, 100, false).answer(4, 100, 201, false, &again);
        assert!(h
            .check()
            .iter()
            .any(|v| v.contains("op 101 ran after op 100")));
        // Past the retention, a key runs again legitimately.
        let late = RETENTION.as_millis() as u64 + 1000;
        let mut h = clean();
        h.run(101, 4, late, false)
            .answer(4, late, 201, false, &again);
        assert_eq!(h.check(), Vec::<String>::new());
    }

    #[test]
    fn a_fresh_answer_is_a_completion_only_away_from_faults() {
        let mut h = History::new();
        let first = h.body(100, 100);
        let again = h.body(100, 101);
        h.run(100, 1, 0, true)
            .answer(1, 0, 201, false, &first)
            .run(101, 2, 40, false)
            .answer(2, 40, 201, false, &again);
        assert!(h
            .check()
            .iter()
            .any(|v| v.contains("op 101 ran after op 100")));
        // A fault around the first answer: the store may have failed, the run is allowed.
        h.fault(5, 8);
        assert_eq!(h.check(), Vec::<String>::new());
    }

    #[test]
    fn undocumented_statuses_and_a_422_fire() {
        let mut h = clean();
        h.answer(
            4,
            60,
            422,
            false,
            "this idempotency key was used for another request\n",
        )
        .answer(
            5,
            61,
            500,
            false,
            "the idempotency key could not be checked\n",
        )
        .answer(6, 62, 503, false, "something else\n")
        .answer(7, 63, 201, false, "not a handler body");
        let found = h.check();
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].contains("a 422 for a retry with the same body"));
    }

    #[test]
    fn a_fresh_answer_from_another_requests_run_fires() {
        let mut h = clean();
        let fresh = h.body(100, 100);
        h.answer(4, 60, 201, false, &fresh);
        let found = h.check();
        assert!(
            found
                .iter()
                .any(|v| v.contains("which served another request")),
            "{found:?}"
        );
    }
}
