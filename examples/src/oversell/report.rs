//! The numbers of one run, and the table that compares runs.

use std::time::Duration;

use super::load::Load;
use super::Guard;

/// The outcome of one run.
#[derive(Debug, Clone)]
pub struct Report {
    /// How the stock was guarded.
    pub guard: Guard,
    /// Stock before the run.
    pub initial_stock: i64,
    /// Purchases answered `200 OK`.
    pub accepted: usize,
    /// Requests answered anything else (sold out, busy, errors).
    pub refused: usize,
    /// Stock after the run.
    pub final_stock: i64,
    /// Wall time of the load.
    pub elapsed: Duration,
    /// Median request latency.
    pub p50: Duration,
    /// 99th-percentile request latency.
    pub p99: Duration,
}

impl Report {
    pub(crate) fn new(guard: Guard, initial_stock: i64, final_stock: i64, mut load: Load) -> Self {
        load.latencies.sort_unstable();
        let accepted = load.statuses.get(&200).copied().unwrap_or(0);
        let total: usize = load.statuses.values().sum();
        Self {
            guard,
            initial_stock,
            accepted,
            refused: total - accepted,
            final_stock,
            elapsed: load.elapsed,
            p50: percentile(&load.latencies, 50),
            p99: percentile(&load.latencies, 99),
        }
    }

    /// Units sold that the stock never gave: accepted purchases beyond what the stock fell by.
    pub fn oversold(&self) -> i64 {
        i64::try_from(self.accepted).unwrap_or(i64::MAX) - (self.initial_stock - self.final_stock)
    }

    /// True when exactly the stock was sold, no more and no less.
    pub fn is_exact(&self) -> bool {
        self.oversold() == 0
            && self.final_stock >= 0
            && i64::try_from(self.accepted).ok() == Some(self.initial_stock - self.final_stock)
    }

    /// Requests per second over the run.
    pub fn requests_per_second(&self) -> f64 {
        (self.accepted + self.refused) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Prints the runs side by side.
pub fn print_table(reports: &[Report]) {
    println!(
        "{:<26} {:>7} {:>9} {:>7} {:>9} {:>8} {:>9} {:>9} {:>9}",
        "guard", "stock", "accepted", "final", "oversold", "time", "req/s", "p50", "p99"
    );
    for r in reports {
        println!(
            "{:<26} {:>7} {:>9} {:>7} {:>9} {:>7.2}s {:>9.0} {:>7.1}ms {:>7.1}ms",
            r.guard.label(),
            r.initial_stock,
            r.accepted,
            r.final_stock,
            r.oversold(),
            r.elapsed.as_secs_f64(),
            r.requests_per_second(),
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
        );
    }
}
