//! A semaphore with expiring permits: at most 3 exports per tenant across every instance.
//! A permit has a lease, renewed while its holder lives and back by itself when it dies.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example semaphore
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_examples::ExampleRedis;
use lock_core::LockClient;

const PERMITS: u32 = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    let client = LockClient::new(redis.url())?;
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let mut exports = Vec::new();
    for i in 0..8 {
        let (client, running, most) = (client.clone(), running.clone(), most.clone());
        exports.push(tokio::spawn(async move {
            client
                .semaphore("export_tenant_9", PERMITS)
                .run(async {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    println!("export {i} runs ({now} running)");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
        }));
    }
    for export in exports {
        export.await??;
    }
    println!(
        "8 exports, at most {} at once (limit {PERMITS})",
        most.load(Ordering::SeqCst)
    );

    let permits: Vec<_> = futures_util::future::try_join_all(
        (0..PERMITS).map(|_| client.semaphore("export_tenant_9", PERMITS).acquire()),
    )
    .await?;
    let full = client
        .semaphore("export_tenant_9", PERMITS)
        .try_acquire()
        .await?;
    println!(
        "with {PERMITS} permits out, another try gets {:?}",
        full.map(|_| "a permit")
    );
    for permit in permits {
        permit.release().await?;
    }
    Ok(())
}
