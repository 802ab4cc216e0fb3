//! The run's report: operations by kind and outcome, faults by type, violations per
//! checker, each violation with the history around it and the command to replay.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::args::{Control, Topology};
use crate::check::handoff::Stats;
use crate::check::{Indexed, Violation};
use crate::history::{Event, Outcome, Record};
use crate::nemesis::Counts;

/// Every checker, in report order.
pub const CHECKERS: [&str; 10] = [
    "registers",
    "exclusion",
    "honesty",
    "liveness",
    "leader",
    "jobs",
    "idempotency",
    "http",
    "guarded",
    crate::check::handoff::CHECKER,
];
/// Violations shown in full per checker.
const SHOWN: usize = 3;
/// History lines shown around a violation.
const CONTEXT_LINES: usize = 40;

/// What a run found.
#[derive(Debug)]
pub struct Report {
    /// The topology.
    pub topology: Topology,
    /// The nemesis' duration.
    pub secs: u64,
    /// The seed.
    pub seed: u64,
    /// The negative control, if any.
    pub control: Option<Control>,
    /// Operations by kind, then outcome.
    pub ops: BTreeMap<String, BTreeMap<String, u64>>,
    /// HTTP requests by outcome (see [`http_counts`]).
    pub http: BTreeMap<String, u64>,
    /// Faults by type.
    pub faults: Counts,
    /// Register accesses the linearizability search covered.
    pub linearizability_checked: usize,
    /// Accesses in segments too long to search.
    pub linearizability_unchecked: usize,
    /// Unsafe windows excluded from the exclusion checker.
    pub unsafe_windows: usize,
    /// Client processes that had to be killed at the end.
    pub killed_at_stop: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// The violations.
    pub violations: Vec<Violation>,
    /// The hand-off checker's blocked pieces.
    pub handoff: Stats,
}

impl Default for Report {
    fn default() -> Self {
        Self {
            topology: Topology::Single,
            secs: 0,
            seed: 0,
            control: None,
            ops: BTreeMap::new(),
            http: BTreeMap::new(),
            faults: Counts::new(),
            linearizability_checked: 0,
            linearizability_unchecked: 0,
            unsafe_windows: 0,
            killed_at_stop: 0,
            elapsed: Duration::ZERO,
            violations: Vec::new(),
            handoff: Stats::default(),
        }
    }
}

impl Report {
    /// Violations per checker.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        CHECKERS
            .iter()
            .map(|&c| (c, self.violations.iter().filter(|v| v.checker == c).count()))
            .collect()
    }

    /// A run passes with no violation; a negative control passes when the checkers it
    /// targets fired (unfenced: the registers; nolock: registers, exclusion, honesty and
    /// jobs, and with one Redis leader, idempotency and http; both: the guarded registers
    /// written with plain commands, where a control writes them — one server, Cluster;
    /// dead-grant: the hand-off checker).
    pub fn passed(&self) -> bool {
        let counts = self.counts();
        let plain = matches!(self.topology, Topology::Single | Topology::Cluster);
        let guarded_fired = !plain || counts["guarded"] > 0;
        match self.control {
            None => self.violations.is_empty(),
            Some(Control::Unfenced) => counts["registers"] > 0 && guarded_fired,
            Some(Control::NoLock) => {
                let one_redis = self.topology != Topology::Redlock;
                guarded_fired
                    && counts["registers"] > 0
                    && counts["exclusion"] > 0
                    && counts["honesty"] > 0
                    && counts["jobs"] > 0
                    && (!one_redis
                        || counts["leader"] > 0 && counts["idempotency"] > 0 && counts["http"] > 0)
            }
            Some(Control::DeadGrant) => counts[crate::check::handoff::CHECKER] > 0,
        }
    }
}

/// Operations by kind and outcome (`ok`, `fail:<why>`, `info:<why>`, `no answer` for an
/// operation whose process died).
pub fn op_counts(ix: &Indexed) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for view in ix.ops.values().filter(|v| !v.kind.is_empty()) {
        let outcome = match &view.complete {
            Some(Outcome::Ok) => "ok".to_owned(),
            Some(Outcome::Fail(why)) => format!("fail:{why}"),
            Some(Outcome::Info(why)) => format!("info:{why}"),
            None => "no answer".to_owned(),
        };
        *out.entry(view.kind.clone())
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }
    out
}

/// HTTP requests by outcome: the status (`201`, `201 replayed`, `409`, `503 <text>`, …) of
/// an answered one; `refused`, `timeout`, `cut` of one without an answer; `no answer` when
/// the sending process died first.
pub fn http_counts(records: &[Record]) -> BTreeMap<String, u64> {
    let mut outcome: BTreeMap<u64, String> = BTreeMap::new();
    for r in records {
        let text = match &r.ev {
            Event::Invoke { kind, .. } if kind == "http" => "no answer".to_owned(),
            Event::HttpAnswer {
                status,
                replayed: true,
                ..
            } => format!("{status} replayed"),
            Event::HttpAnswer {
                status: 503, body, ..
            } => format!("503 {}", body.trim_end()),
            Event::HttpAnswer { status, .. } => status.to_string(),
            Event::Complete {
                outcome: Outcome::Fail(why) | Outcome::Info(why),
            } if outcome.get(&r.op).is_some_and(|o| o == "no answer") => why.clone(),
            _ => continue,
        };
        if let Some(entry) = outcome.get_mut(&r.op) {
            *entry = text;
        } else if text == "no answer" {
            outcome.insert(r.op, text);
        }
    }
    let mut counts = BTreeMap::new();
    for text in outcome.into_values() {
        *counts.entry(text).or_default() += 1;
    }
    counts
}

#[derive(Serialize)]
struct Summary<'a> {
    topology: String,
    secs: u64,
    seed: u64,
    control: Option<String>,
    elapsed_secs: u64,
    ops_total: u64,
    ops: &'a BTreeMap<String, BTreeMap<String, u64>>,
    http: &'a BTreeMap<String, u64>,
    faults: &'a Counts,
    violations: BTreeMap<&'static str, usize>,
    linearizability_checked: usize,
    linearizability_unchecked: usize,
    handoff_pieces: usize,
    handoff_p50_ms: u64,
    handoff_p99_ms: u64,
    handoff_max_ms: u64,
    passed: bool,
}

/// Prints the report (and writes `summary.json` into `dir`).
pub fn print(report: &Report, records: &[Record], replay: &str, dir: &Path) {
    let total: u64 = report.ops.values().flat_map(|o| o.values()).sum();
    let summary = Summary {
        topology: report.topology.to_string(),
        secs: report.secs,
        seed: report.seed,
        control: report.control.map(|c| c.to_string()),
        elapsed_secs: report.elapsed.as_secs(),
        ops_total: total,
        ops: &report.ops,
        http: &report.http,
        faults: &report.faults,
        violations: report.counts(),
        linearizability_checked: report.linearizability_checked,
        linearizability_unchecked: report.linearizability_unchecked,
        handoff_pieces: report.handoff.pieces.len(),
        handoff_p50_ms: report.handoff.quantile_ms(0.5),
        handoff_p99_ms: report.handoff.quantile_ms(0.99),
        handoff_max_ms: report.handoff.quantile_ms(1.0),
        passed: report.passed(),
    };
    let json = serde_json::to_string(&summary).unwrap_or_default();
    let _ = std::fs::write(dir.join("summary.json"), &json);
    println!("verify: {total} operations");
    for (kind, outcomes) in &report.ops {
        let list: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o}={n}")).collect();
        println!("  {kind:<14} {}", list.join(" "));
    }
    if !report.http.is_empty() {
        let total: u64 = report.http.values().sum();
        let list: Vec<String> = report
            .http
            .iter()
            .map(|(o, n)| format!("{o}={n}"))
            .collect();
        println!("verify: {total} HTTP requests: {}", list.join(" "));
    }
    let faults: Vec<String> = report
        .faults
        .iter()
        .map(|(f, n)| format!("{f}={n}"))
        .collect();
    println!(
        "verify: faults {}",
        if faults.is_empty() {
            "none".into()
        } else {
            faults.join(" ")
        }
    );
    let guarded: Vec<String> = crate::check::guarded::outcomes(records)
        .iter()
        .map(|(o, n)| format!("{o}={n}"))
        .collect();
    if !guarded.is_empty() {
        println!("verify: guarded writes {}", guarded.join(" "));
    }
    println!(
        "verify: linearizability searched over {} register accesses ({} in segments too long to search); {} unsafe windows",
        report.linearizability_checked, report.linearizability_unchecked, report.unsafe_windows
    );
    println!(
        "verify: hand-offs: {} stretches of a free name with a live waiter, p50 {} ms, p99 {} ms, longest {} ms",
        report.handoff.pieces.len(),
        report.handoff.quantile_ms(0.5),
        report.handoff.quantile_ms(0.99),
        report.handoff.quantile_ms(1.0)
    );
    for checker in CHECKERS {
        let found: Vec<&Violation> = report
            .violations
            .iter()
            .filter(|v| v.checker == checker)
            .collect();
        println!("verify: {checker}: {} violations", found.len());
        for v in found.iter().take(SHOWN) {
            println!("  - {}", v.what);
            for line in context(records, v) {
                println!("      {line}");
            }
        }
    }
    println!("SUMMARY {json}");
    if !report.violations.is_empty() || report.control.is_some() {
        println!("verify: replay with: {replay}");
    }
}

/// The history lines around a violation: its ops' events and the faults, ±1 s.
fn context(records: &[Record], v: &Violation) -> Vec<String> {
    let (from, to) = (
        v.span.0.saturating_sub(1_000_000_000),
        v.span.1.saturating_add(1_000_000_000),
    );
    let base = records.first().map_or(0, |r| r.t);
    records
        .iter()
        .filter(|r| {
            r.t >= from && r.t <= to && (v.ops.contains(&r.op) || r.p == 0 || v.ops.is_empty())
        })
        .take(CONTEXT_LINES)
        .map(|r| {
            let ev = serde_json::to_string(&r.ev).unwrap_or_default();
            format!(
                "{:>10.3} ms p{} op {} {ev}",
                (r.t - base) as f64 / 1e6,
                r.p,
                r.op
            )
        })
        .collect()
}
