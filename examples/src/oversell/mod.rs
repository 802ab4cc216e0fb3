//! The oversell demo: N instances of an inventory service share a stock kept in Redis and
//! sell it with a non-atomic read → check → write, as the service in the seeds does. With a
//! lock local to each instance they oversell under load; with [`DistributedLockLayer`] on the
//! buy route they sell exactly the stock. The stock in Redis variant ([`Guard::Guarded`])
//! keeps the stock beside the lock and takes each unit with a guarded `DECR`
//! ([`LockInfo::write`]): it sells exactly the stock even when a holder stalls past its lease
//! between its check and its write ([`Settings::stall`]), where the plain write oversells.
//!
//! [`DistributedLockLayer`]: lock_tower::lock::DistributedLockLayer
//! [`LockInfo::write`]: lock_core::LockInfo::write

pub mod cli;
mod load;
mod report;
mod service;

use std::time::Duration;

use indicatif::ProgressBar;
use redis::AsyncCommands;

/// The demo's errors: Redis, I/O and HTTP failures, reported as text.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

pub use report::{table, Report};

/// The item every request buys.
pub const ITEM: u64 = 7;

/// How a run guards the read-modify-write of the stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// A `tokio::sync::Mutex` in each instance: correct in one process, useless across three.
    LocalMutex,
    /// `DistributedLockLayer` on the buy route, one lock per item across all instances.
    Distributed,
    /// The layer too, and the stock beside the lock, taken with a guarded `DECR` that
    /// commits only while the request's hold is current.
    Guarded,
}

impl Guard {
    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::LocalMutex => "local Mutex per instance",
            Self::Distributed => "DistributedLockLayer",
            Self::Guarded => "guarded write (in Redis)",
        }
    }
}

/// The size of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Initial stock of the item.
    pub stock: i64,
    /// Purchase requests fired.
    pub requests: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Service instances, each on its own loopback port with its own clients.
    pub instances: usize,
    /// How long a request waits for the item's lock (see [`Settings::queue_wait`]).
    pub lock_wait: Duration,
    /// A stall between the check and the write of one purchase in ten, as a GC pause or a
    /// slow VM makes: the locks then get a lease of a third of it (no watchdog) and the
    /// handler runs on when it is lost (`OnLost::Continue`), as a paused process would.
    /// `None`: no stall, watchdog-renewed locks.
    pub stall: Option<Duration>,
}

impl Settings {
    /// A lock wait that outlasts the whole queue of a run at `concurrency`.
    ///
    /// With the lock, purchases run one at a time. At most `concurrency` requests are in
    /// flight and the lock's queue is fair (first come, first served), so a request waits
    /// for at most `concurrency - 1` critical sections (two Redis round trips and a
    /// hand-off each: about 0.3 ms in a release build on loopback). A request that gives
    /// up leaves a unit unsold, which the demo counts as a failure, so the wait allows
    /// 250 ms per request ahead (hundreds of times the measured cost, for a loaded 2-core
    /// machine or a debug build) and never less than 30 s, the library's default wait. A
    /// long wait costs nothing when the queue moves; a short one turns a slow moment into
    /// unsold stock.
    pub fn queue_wait(concurrency: usize) -> Duration {
        let per_request = Duration::from_millis(250);
        let queue = per_request.saturating_mul(u32::try_from(concurrency).unwrap_or(u32::MAX));
        queue.max(lock_core::LockClientBuilder::DEFAULT_WAIT)
    }
}

/// Runs one experiment against the Redis at `url`: resets the stock, starts the instances,
/// fires the load, and reports what was sold.
///
/// # Errors
/// Redis or server start-up failures.
pub async fn run(
    url: &str,
    settings: &Settings,
    guard: Guard,
    progress: Option<ProgressBar>,
) -> Result<Report, Error> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let key = service::stock_key(ITEM, guard);
    let () = conn.set(&key, settings.stock).await?;
    let instances = service::start(url, settings, guard).await?;
    let addrs: Vec<_> = instances.iter().map(service::Instance::addr).collect();
    let path = format!("/items/{ITEM}/buy");
    let load = load::fire(&addrs, &path, settings, progress).await;
    drop(instances);
    let final_stock: i64 = conn.get(&key).await?;
    Ok(Report::new(
        guard,
        settings.stock,
        settings.requests,
        final_stock,
        load,
    ))
}
