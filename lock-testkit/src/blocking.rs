//! The async starts: a start (spawning processes, waiting for them to answer) is blocking
//! work, run on Tokio's blocking pool so that an async test's runtime thread runs its other
//! tasks meanwhile (a Cluster with replicas takes seconds to come up).

/// Runs `start` on Tokio's blocking pool and answers its result; a panic in it is resumed
/// here.
///
/// # Panics
/// Outside a Tokio runtime; when `start` panics; when the runtime shuts down first.
pub(crate) async fn off_the_runtime<T, F>(start: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(start).await {
        Ok(value) => value,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("starting the servers: {error}"),
        },
    }
}
