//! Setup work done once for every caller that needed it at the same time: the first does it,
//! the others that found it needed meanwhile take that as theirs.
//!
//! Loading the Functions library is such work: on a fresh server every call in flight meets
//! the library missing at once, and without this each would send its own `FUNCTION LOAD`
//! (258 loads of about 1.6 ms of Redis CPU each, measured with 1,024 waiters).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// One-at-a-time work, shared by every clone of what holds it.
#[derive(Debug, Default)]
pub(crate) struct SingleFlight {
    /// How many times the work was done.
    done: AtomicU64,
    /// Held while the work runs.
    running: tokio::sync::Mutex<()>,
}

impl SingleFlight {
    /// How many times the work was done so far: read it *before* doing what may find the
    /// work needed (sending the call), so that work finished after that serves the caller.
    pub(crate) fn seen(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Runs `work`, one caller at a time, unless it was done since the caller read `seen`:
    /// then the caller needed the work that was done, and `work` is dropped unpolled.
    ///
    /// # Errors
    /// `work`'s error; a failed run does not count, so the next caller tries again.
    ///
    /// # Cancel safety
    /// Dropped while waiting or running, it leaves the work undone for the next caller.
    pub(crate) async fn run<E>(
        &self,
        seen: u64,
        work: impl Future<Output = Result<(), E>>,
    ) -> Result<(), E> {
        let _running = self.running.lock().await;
        if self.seen() != seen {
            return Ok(());
        }
        work.await?;
        self.done.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn callers_that_needed_the_work_together_share_one_run() {
        let (flight, runs) = (
            Arc::new(SingleFlight::default()),
            Arc::new(AtomicUsize::new(0)),
        );
        let seen = flight.seen();
        let callers = (0..16).map(|_| {
            let (flight, runs) = (Arc::clone(&flight), Arc::clone(&runs));
            tokio::spawn(async move {
                let work = async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    Ok::<(), ()>(())
                };
                flight.run(seen, work).await
            })
        });
        for caller in callers.collect::<Vec<_>>() {
            caller.await.unwrap().unwrap();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // A caller that reads after that run and needs the work again does it.
        let again = flight.seen();
        let work = async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<(), ()>(())
        };
        flight.run(again, work).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_run_leaves_the_work_to_the_next_caller() {
        let flight = SingleFlight::default();
        let seen = flight.seen();
        assert_eq!(
            flight.run(seen, async { Err("refused") }).await,
            Err("refused")
        );
        assert_eq!(flight.seen(), seen);
        assert_eq!(flight.run(seen, async { Ok::<(), &str>(()) }).await, Ok(()));
        assert_eq!(flight.seen(), seen + 1);
    }
}
