//! Collecting runs and printing one markdown table per scenario: medians, ratio to the
//! first row (the baseline).

use crate::peers::Lib;
use crate::scenarios::{Metrics, Sizes};

#[derive(Default)]
struct Row {
    label: String,
    runs: Vec<Metrics>,
    na: Option<String>,
}

/// Every run's numbers, by scenario, in insertion order of the rows.
#[derive(Default)]
pub struct Results {
    scenarios: Vec<(char, Vec<Row>)>,
}

/// Metrics worth a ratio to the baseline (rates and latencies; not counts).
const RATIO: &[&str] = &[
    "p50 µs",
    "p99 µs",
    "cycles/s",
    "acq/s",
    "hand-offs/s",
    "wait p50 µs",
    "wait p99 µs",
    "req/s",
    "Lua calls/tick",
    "Redis µs/cycle",
];

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

pub fn fmt_num(x: f64) -> String {
    if x.is_nan() {
        return "–".to_owned();
    }
    if x.abs() >= 100.0 {
        let s = format!("{:.0}", x.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        return if x < 0.0 { format!("-{out}") } else { out };
    }
    if x.fract() == 0.0 {
        return format!("{x:.0}");
    }
    format!("{x:.2}")
}

impl Results {
    fn row(&mut self, scenario: char, label: &str) -> &mut Row {
        let pos = match self.scenarios.iter().position(|(s, _)| *s == scenario) {
            Some(pos) => pos,
            None => {
                self.scenarios.push((scenario, Vec::new()));
                self.scenarios.len() - 1
            }
        };
        let rows = &mut self.scenarios[pos].1;
        let i = match rows.iter().position(|r| r.label == label) {
            Some(i) => i,
            None => {
                rows.push(Row {
                    label: label.to_owned(),
                    ..Row::default()
                });
                rows.len() - 1
            }
        };
        &mut rows[i]
    }

    pub fn add(&mut self, scenario: char, lib: Lib, metrics: Metrics) {
        self.add_row(scenario, lib.name(), metrics);
    }

    pub fn add_row(&mut self, scenario: char, label: &str, metrics: Metrics) {
        self.row(scenario, label).runs.push(metrics);
    }

    pub fn not_applicable(&mut self, scenario: char, lib: Lib, why: &str) {
        self.row(scenario, lib.name()).na = Some(why.to_owned());
    }

    pub fn render(&mut self, s: &Sizes, runs: usize, d_runs: usize) -> String {
        self.scenarios.sort_by_key(|(c, _)| *c);
        let mut out = String::new();
        for (scenario, rows) in &self.scenarios {
            let n = if *scenario == 'D' { d_runs } else { runs };
            out.push_str(&format!("\n### {}\n\n", title(*scenario, s, n)));
            let Some(first) = rows.iter().find(|r| !r.runs.is_empty()) else {
                continue;
            };
            let names: Vec<&str> = first.runs[0].iter().map(|(k, _)| *k).collect();
            out.push_str(&format!("| | {} |\n", names.join(" | ")));
            out.push_str(&format!("|---|{}\n", "---:|".repeat(names.len())));
            let medians = |row: &Row| -> Vec<f64> {
                (0..names.len())
                    .map(|i| median(row.runs.iter().map(|m| m[i].1).collect()))
                    .collect()
            };
            let base = medians(first);
            for row in rows {
                if let Some(why) = &row.na {
                    out.push_str(&format!("| {} | n/a: {why} |\n", row.label));
                    continue;
                }
                let cells: Vec<String> = medians(row)
                    .iter()
                    .zip(&base)
                    .zip(&names)
                    .map(|((v, b), name)| {
                        // E's rows differ in load: its own column compares like with like.
                        let plain =
                            std::ptr::eq(row, first) || !RATIO.contains(name) || *scenario == 'E';
                        if plain || *b == 0.0 || b.is_nan() || v.is_nan() {
                            fmt_num(*v)
                        } else {
                            format!("{} (×{:.2})", fmt_num(*v), v / b)
                        }
                    })
                    .collect();
                out.push_str(&format!("| {} | {} |\n", row.label, cells.join(" | ")));
            }
        }
        out
    }
}

fn title(scenario: char, s: &Sizes, runs: usize) -> String {
    let med = if runs > 1 {
        format!("median of {runs} runs")
    } else {
        "1 run".to_owned()
    };
    match scenario {
        'A' => format!(
            "A. uncontended: 1 task, {} sequential acquire+release on distinct names ({med})",
            s.a_iters
        ),
        'B' => format!(
            "B. parallel: {} tasks, each on its own name, {} s ({med})",
            s.b_tasks, s.b_secs
        ),
        'C' => format!(
            "C. contention: {} tasks on one name, hold one yield, {} s, default waiting ({med})",
            s.c_tasks, s.c_secs
        ),
        'D' => format!(
            "D. keep-alive: {} locks held {} s, lease {:?} ({med})",
            s.d_locks, s.d_secs, s.d_lease
        ),
        'E' => format!(
            "E. the layer: axum route, {} keep-alive connections, {} s each ({med})",
            s.e_conns, s.e_secs
        ),
        other => other.to_string(),
    }
}
