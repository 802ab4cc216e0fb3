//! A scheduled job run once across the fleet: three instances fire the same report every
//! 500 ms on `tokio::time::interval`s whose clocks are 0, 100 and 200 ms apart; each fire
//! runs on exactly one of them, and the others say they skipped it.
//!
//! `hold_at_least = "300ms"` is what makes it work: the report takes a millisecond, so
//! without it the name would be free again before the later instances fire, and each fire
//! would run three times. `hold_at_most = "10s"` ends the hold of an instance that dies
//! mid-report.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example scheduled_job
//! ```

use std::time::Duration;

use distlock_examples::ExampleRedis;
use lock_core::job::JobOutcome;
use lock_core::{distributed_lock, LockClient, LockError};

const PERIOD: Duration = Duration::from_millis(500);
const FIRES: u64 = 10;

/// The job: the fire's number is part of its name, so a fire can only be run once.
#[distributed_lock(
    key = "report_<fire>",
    client = locks,
    on_busy = "skip",
    hold_at_least = "300ms",
    hold_at_most = "10s"
)]
async fn report(
    locks: &LockClient,
    instance: usize,
    fire: u64,
) -> Result<JobOutcome<()>, LockError> {
    println!("fire {fire}: instance {instance} runs the report");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    let start = tokio::time::Instant::now() + Duration::from_millis(200);
    let mut instances = Vec::new();
    for (instance, skew_ms) in [0, 100, 200].into_iter().enumerate() {
        // Each instance has a client of its own, as separate processes would.
        let locks = LockClient::new(redis.url())?;
        instances.push(tokio::spawn(async move {
            let skew = Duration::from_millis(skew_ms);
            let mut ticks = tokio::time::interval_at(start + skew, PERIOD);
            let mut ran = 0;
            for fire in 0..FIRES {
                ticks.tick().await;
                match report(&locks, instance, fire).await? {
                    JobOutcome::Ran(()) => ran += 1,
                    JobOutcome::Skipped(_) => {
                        println!("fire {fire}: instance {instance} skipped it")
                    }
                }
            }
            Ok::<_, LockError>(ran)
        }));
    }
    let mut total = 0;
    for instance in instances {
        total += instance.await??;
    }
    println!("{FIRES} fires, {total} runs across 3 instances");
    Ok(())
}
