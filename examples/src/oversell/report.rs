//! The numbers of one run, the verdict on them, and the table that compares runs.

use std::fmt::Write as _;
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
    /// Purchase requests fired.
    pub requests: usize,
    /// Purchases answered `200 OK`.
    pub accepted: usize,
    /// Purchases answered `410 Gone`: the handler found no stock.
    pub sold_out: usize,
    /// Requests answered anything else (`409` busy after the lock wait, `5xx`) or not at all.
    pub failed: usize,
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
    pub(crate) fn new(
        guard: Guard,
        initial_stock: i64,
        requests: usize,
        final_stock: i64,
        mut load: Load,
    ) -> Self {
        load.latencies.sort_unstable();
        let count = |status| load.statuses.get(&status).copied().unwrap_or(0);
        let (accepted, sold_out) = (count(200), count(410));
        let answered: usize = load.statuses.values().sum();
        Self {
            guard,
            initial_stock,
            requests,
            accepted,
            sold_out,
            failed: answered - accepted - sold_out,
            final_stock,
            elapsed: load.elapsed,
            p50: percentile(&load.latencies, 50),
            p99: percentile(&load.latencies, 99),
        }
    }

    /// Units sold that the stock never gave: accepted purchases beyond what the stock fell by.
    pub fn oversold(&self) -> i64 {
        count(self.accepted) - (self.initial_stock - self.final_stock)
    }

    /// What an exact run sells: the whole stock, or one unit per request when there are
    /// fewer requests than units.
    pub fn expected_sales(&self) -> i64 {
        self.initial_stock.min(count(self.requests)).max(0)
    }

    /// Why the run did not sell exactly [`expected_sales`](Self::expected_sales) units, each
    /// accepted purchase taking one from the stock; `None` when it did.
    pub fn inexact(&self) -> Option<String> {
        let (accepted, expected) = (count(self.accepted), self.expected_sales());
        let fell = self.initial_stock - self.final_stock;
        if self.oversold() > 0 {
            Some(format!(
                "oversold {}: {accepted} purchases accepted, the stock fell by {fell}",
                self.oversold()
            ))
        } else if accepted < expected {
            Some(format!(
                "{} of the stock left unsold: {} requests were refused busy or failed",
                expected - accepted,
                self.failed
            ))
        } else if accepted != expected || fell != expected {
            Some(format!(
                "{accepted} purchases accepted and the stock fell by {fell}, expected {expected}"
            ))
        } else {
            None
        }
    }

    /// True when exactly the stock was sold, no more and no less (see [`inexact`](Self::inexact)).
    pub fn is_exact(&self) -> bool {
        self.inexact().is_none()
    }

    /// Requests per second over the run.
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A count as a stock quantity.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `p`th percentile of sorted latencies (zero when there are none).
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// The runs side by side, one line each under a header.
pub fn table(reports: &[Report]) -> String {
    let mut out = format!(
        "{:<24} {:>5} {:>8} {:>8} {:>8} {:>5} {:>8} {:>6} {:>6} {:>7} {:>7}\n",
        "guard",
        "stock",
        "accepted",
        "sold out",
        "busy/err",
        "final",
        "oversold",
        "time",
        "req/s",
        "p50",
        "p99"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<24} {:>5} {:>8} {:>8} {:>8} {:>5} {:>8} {:>5.2}s {:>6.0} {:>5.1}ms {:>5.1}ms",
            r.guard.label(),
            r.initial_stock,
            r.accepted,
            r.sold_out,
            r.failed,
            r.final_stock,
            r.oversold(),
            r.elapsed.as_secs_f64(),
            r.requests_per_second(),
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked(requests: usize, accepted: usize, failed: usize, final_stock: i64) -> Report {
        Report {
            guard: Guard::Distributed,
            initial_stock: 100,
            requests,
            accepted,
            sold_out: requests - accepted - failed,
            failed,
            final_stock,
            elapsed: Duration::from_secs(1),
            p50: Duration::ZERO,
            p99: Duration::ZERO,
        }
    }

    #[test]
    fn selling_the_whole_stock_is_exact() {
        assert_eq!(locked(1000, 100, 0, 0).inexact(), None);
    }

    /// Requests that gave up after the lock wait leave stock unsold: consistent, not exact.
    #[test]
    fn stock_left_unsold_is_not_exact() {
        let why = locked(1000, 90, 12, 10).inexact().unwrap();
        assert_eq!(
            why,
            "10 of the stock left unsold: 12 requests were refused busy or failed"
        );
    }

    #[test]
    fn overselling_is_not_exact() {
        let why = locked(1000, 130, 0, 0).inexact().unwrap();
        assert!(why.starts_with("oversold 30:"), "{why}");
    }

    #[test]
    fn a_stock_that_fell_without_a_sale_is_not_exact() {
        assert!(locked(1000, 100, 1, -1).inexact().is_some());
    }

    #[test]
    fn fewer_requests_than_units_sell_one_each() {
        let run = locked(40, 40, 0, 60);
        assert_eq!(run.expected_sales(), 40);
        assert!(run.is_exact());
    }
}
