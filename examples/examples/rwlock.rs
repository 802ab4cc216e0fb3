//! A read-write lock: readers of a catalog entry run side by side, a price update runs
//! alone, and once it waits, new readers queue behind it (writers are never starved).
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example rwlock
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_examples::ExampleRedis;
use lock_core::{LockClient, LockError};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    let client = LockClient::new(redis.url())?;
    let (reading, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let mut readers = Vec::new();
    for i in 0..4 {
        let (client, reading, most) = (client.clone(), reading.clone(), most.clone());
        readers.push(tokio::spawn(async move {
            let guard = client.read_lock("catalog_7").await?;
            let now = reading.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            println!(
                "reader {i} reads (token {}, {now} reading)",
                guard.fencing_token()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            reading.fetch_sub(1, Ordering::SeqCst);
            guard.release().await
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let writer = client.write_lock("catalog_7").await?;
    println!(
        "the writer updates the price alone ({} reading), token {}",
        reading.load(Ordering::SeqCst),
        writer.fencing_token()
    );
    // The scope's write lock covers reading: this re-enters it at once.
    let token = lock_core::scope(async {
        let write = client.write_lock("catalog_7").await?;
        let read = client.read_lock("catalog_7").await?;
        Ok::<_, LockError>((write.fencing_token(), read.fencing_token()))
    });
    writer.release().await?;
    let (write, read) = token.await?;
    println!("in one scope, the read lock re-entered the write lock: tokens {write} = {read}");
    for reader in readers {
        reader.await??;
    }
    println!("at most {} readers at once", most.load(Ordering::SeqCst));
    Ok(())
}
