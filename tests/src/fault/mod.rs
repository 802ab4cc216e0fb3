//! Support for the fault-injection suite (`tests/tests/faults/`): checkers, child-process
//! lock holders and small helpers. Everything runs on loopback; every wait is bounded.
//!
//! * [`clock`]: `CLOCK_MONOTONIC` timestamps, comparable across processes of one machine;
//! * [`overlap`]: the interval-overlap checker (holders report enter/exit timestamps);
//! * [`store`]: the fenced store (rejects a token lower than the highest it has seen) and the
//!   unfenced lost-update counter, both kept on a Redis server of their own;
//! * [`holder`]: [`HolderProcess`](holder::HolderProcess), a child running the `holder`
//!   binary that tests SIGSTOP, SIGCONT and SIGKILL;
//! * [`lock_url`]: a lock client's topology as one command-line word, for such children;
//! * [`family`]: the cross-process exclusion harness of read-write locks and semaphores;
//! * [`cluster`]: which node serves a key, planned and forced failovers;
//! * [`reshard`]: one slot moved to another master, step by step;
//! * [`rng`]: a seeded generator for reproducible random faults;
//! * [`Summary`]: min / median / max of measured durations, for the reports.

pub mod clock;
pub mod cluster;
pub mod family;
pub mod holder;
pub mod lock_url;
pub mod overlap;
pub mod reshard;
pub mod rng;
pub mod store;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// Runs `trials` trials, at most `concurrency` at a time, and returns their results in trial
/// order. A panicking trial fails the caller with the trial's own message.
pub async fn run_trials<T, F, Fut>(trials: usize, concurrency: usize, trial: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let mut results: Vec<Option<T>> = (0..trials).map(|_| None).collect();
    let mut running = tokio::task::JoinSet::new();
    let mut next = 0;
    while next < trials || !running.is_empty() {
        while next < trials && running.len() < concurrency.max(1) {
            let fut = trial(next);
            let i = next;
            running.spawn(async move { (i, fut.await) });
            next += 1;
        }
        match running.join_next().await {
            Some(Ok((i, value))) => results[i] = Some(value),
            Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Some(Err(e)) => panic!("trial task failed: {e}"),
            None => {}
        }
    }
    results.into_iter().flatten().collect()
}

/// Waits up to `bound` until the watchdog has renewed `key`: its PTTL rises by more than
/// 20 ms over the lowest value seen (a renewal resets it to the full lease).
///
/// # Panics
/// When the key is missing or not renewed in time.
pub async fn wait_renewed(conn: &mut MultiplexedConnection, key: &str, bound: Duration) {
    let deadline = tokio::time::Instant::now() + bound;
    let mut lowest = i64::MAX;
    loop {
        let ttl = crate::locks::pttl(conn, key).await;
        assert!(ttl > 0, "{key} has no lease to renew (PTTL {ttl})");
        if ttl > lowest.saturating_add(20) {
            return;
        }
        lowest = lowest.min(ttl);
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} not renewed within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Min, median and max of a set of measured durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample.
    pub min: Duration,
    /// Median (the upper one for an even count).
    pub median: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl Summary {
    /// The summary of `samples`; `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Summary {
            count: sorted.len(),
            min: *sorted.first()?,
            median: sorted[sorted.len() / 2],
            max: *sorted.last()?,
        })
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "n={} min={:.0}ms median={:.0}ms max={:.0}ms",
            self.count,
            ms(self.min),
            ms(self.median),
            ms(self.max)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_takes_min_median_max() {
        let ms = Duration::from_millis;
        let s = Summary::of(&[ms(30), ms(10), ms(20), ms(40)]).unwrap();
        assert_eq!(
            (s.count, s.min, s.median, s.max),
            (4, ms(10), ms(30), ms(40))
        );
        assert_eq!(s.to_string(), "n=4 min=10ms median=30ms max=40ms");
        assert_eq!(Summary::of(&[]), None);
    }

    #[tokio::test]
    async fn trials_keep_their_order_and_bound_concurrency() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let out = run_trials(10, 3, |i| {
            let (now, peak) = (now.clone(), peak.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
                i * 2
            }
        })
        .await;
        assert_eq!(out, (0..10).map(|i| i * 2).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 3);
    }
}
