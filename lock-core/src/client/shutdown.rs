//! A graceful end for a client: every hold released now, not after its lease.

use futures_util::future::join_all;

use crate::client::handle::LockClient;
use crate::error::LockError;
use crate::lock::pending::leave;

impl LockClient {
    /// Releases every lock this client (and its clones) holds, takes every acquisition that
    /// waits out of its lock's queue, stops its watchdog and its pub/sub connection, and
    /// refuses every later acquisition with [`LockError::ShutDown`]: for a service that is
    /// stopping, so that its locks are free at once rather than after their leases, and no
    /// hand-off goes to a waiter that is about to exit. Call it from the service's SIGTERM
    /// handling, once the server stopped serving (after axum's `with_graceful_shutdown` or
    /// tonic's `serve_with_shutdown` returned), so that no request still runs under a lock.
    ///
    /// Guards still alive report their lock lost (`lost()` fires) and release nothing more;
    /// an acquisition still waiting ends with [`LockError::ShutDown`]. When this returns,
    /// every release and queue leave it sent was answered. Answers how many holds were
    /// released.
    ///
    /// It also waits (for at most twice the command timeout) for the clean-ups that dropped
    /// futures and guards left to the background: the queue leave of an acquisition dropped
    /// while it waited, the release of a guard dropped without `release()`. A process that
    /// exits right after `shutdown()` thus leaves no queue entry that a hand-off could go
    /// to: drop the waiting acquisitions first, then call it (`distlock exec` does so on a
    /// signal while it waits).
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient, server: impl std::future::Future<Output = ()>) {
    /// // e.g. `axum::serve(listener, app).with_graceful_shutdown(signal)`
    /// server.await;
    /// if let Err(error) = client.shutdown().await {
    ///     eprintln!("some locks end with their lease: {error}");
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    /// The first release that could not reach Redis (that lock ends with its lease); the
    /// others are released all the same.
    ///
    /// # Cancel safety
    /// The client is shut down at the first poll; releases not sent yet when the future is
    /// dropped end with their leases.
    pub async fn shutdown(&self) -> Result<usize, LockError> {
        let (holds, queued) = self.holds.close();
        let releases = holds.into_iter().map(|held| held.release_in_redis());
        let engine = &self.engine;
        let leaves = queued.iter().map(|wait| leave(engine, wait));
        let (releases, _left) =
            futures_util::future::join(join_all(releases), join_all(leaves)).await;
        let mut released = 0;
        let mut first_error = None;
        for outcome in releases {
            match outcome {
                Ok(()) => released += 1,
                Err(error) if error.is_unavailable() => {
                    first_error.get_or_insert(error);
                }
                // Not held any more: nothing to give back.
                Err(_) => {}
            }
        }
        self.finish_cleanups().await;
        self.engine.stop.cancel();
        tracing::info!(released, "lock client shut down");
        first_error.map_or(Ok(released), Err)
    }

    /// Waits for the background clean-ups started so far and those they start, for at most
    /// twice the command timeout (a call, and the functions library's load before it):
    /// each is bounded by those timeouts already, and one stuck past them ends with its
    /// lease or its queue entry's expiry.
    async fn finish_cleanups(&self) {
        let cleanups = &self.engine.cleanups;
        cleanups.close();
        let bound = self.engine.config.command_timeout * 2;
        if tokio::time::timeout(bound, cleanups.wait()).await.is_err() {
            tracing::warn!(
                pending = cleanups.len(),
                "shutdown: background clean-ups still running; they end with their leases"
            );
        }
    }

    /// True once [`shutdown`](Self::shutdown) was called on this client or a clone.
    pub fn is_shut_down(&self) -> bool {
        self.holds.is_closed()
    }
}
