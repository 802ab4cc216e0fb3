//! The quick start: take a lock, see its fencing token, watch a second owner wait for it.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example quickstart
//! ```

use std::time::Duration;

use distlock_examples::ExampleRedis;
use lock_core::LockClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    let client = LockClient::new(redis.url())?;

    let guard = client.lock("item_7").await?;
    println!("took `item_7` with fencing token {}", guard.fencing_token());

    let other = LockClient::new(redis.url())?;
    match other.lock("item_7").try_acquire().await? {
        Some(_) => println!("unexpected: a second owner got it too"),
        None => println!("a second owner finds it busy"),
    }
    let waiter = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let guard = other.lock("item_7").wait(Duration::from_secs(5)).await?;
        println!(
            "the second owner got it {:?} after the release, token {}",
            started.elapsed(),
            guard.fencing_token()
        );
        guard.release().await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.release().await?;
    waiter.await??;

    let sold = client
        .with_lock("item_7", async {
            println!("inside with_lock: {:?}", lock_core::current_lock());
            1
        })
        .await?;
    println!("with_lock returned {sold}");
    Ok(())
}
