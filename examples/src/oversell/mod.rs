//! The oversell demo: N instances of an inventory service share a stock kept in Redis and
//! sell it with a non-atomic read → check → write, as the service in the seeds does. With a
//! lock local to each instance they oversell under load; with [`DistributedLockLayer`] on the
//! buy route they sell exactly the stock.
//!
//! [`DistributedLockLayer`]: lock_tower::DistributedLockLayer

mod load;
mod report;
mod service;

use std::time::Duration;

use indicatif::ProgressBar;
use redis::AsyncCommands;

pub use report::{print_table, Report};

/// The item every request buys.
pub const ITEM: u64 = 7;

/// How a run guards the read-modify-write of the stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// A `tokio::sync::Mutex` in each instance: correct in one process, useless across three.
    LocalMutex,
    /// `DistributedLockLayer` on the buy route, one lock per item across all instances.
    Distributed,
}

impl Guard {
    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::LocalMutex => "local Mutex per instance",
            Self::Distributed => "DistributedLockLayer",
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
    /// How long a request waits for the item's lock.
    pub lock_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            stock: 100,
            requests: 1_000,
            concurrency: 100,
            instances: 3,
            lock_wait: Duration::from_secs(30),
        }
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
) -> Result<Report, Box<dyn std::error::Error + Send + Sync>> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let key = service::stock_key(ITEM);
    let () = conn.set(&key, settings.stock).await?;
    let instances = service::start(url, settings, guard).await?;
    let addrs: Vec<_> = instances.iter().map(service::Instance::addr).collect();
    let path = format!("/items/{ITEM}/buy");
    let load = load::fire(&addrs, &path, settings, progress).await;
    drop(instances);
    let final_stock: i64 = conn.get(&key).await?;
    Ok(Report::new(guard, settings.stock, final_stock, load))
}
