//! A multi-lock: a transfer locks both accounts, all or nothing. Transfers in opposite
//! directions name the accounts in opposite orders and still never deadlock: every client
//! takes the names in one global order.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example transfer
//! ```

use std::time::Duration;

use distlock_examples::ExampleRedis;
use lock_core::LockClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    let client = LockClient::new(redis.url())?;

    let mut transfers = Vec::new();
    for i in 0..10 {
        let client = client.clone();
        let (from, to) = if i % 2 == 0 {
            ("acct_4", "acct_17")
        } else {
            ("acct_17", "acct_4")
        };
        transfers.push(tokio::spawn(async move {
            let both = client
                .lock_all([from, to])
                .wait(Duration::from_secs(10))
                .await?;
            let (a, b) = (both.fencing_token(from), both.fencing_token(to));
            println!("transfer {i}: {from} → {to} under tokens {a:?} and {b:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            both.release().await
        }));
    }
    for transfer in transfers {
        transfer.await??;
    }

    // A name held elsewhere: the whole multi-lock fails, and nothing stays held.
    let other = LockClient::new(redis.url())?;
    let held = other.lock("acct_17").await?;
    let attempt = client.lock_all(["acct_4", "acct_17"]).try_acquire().await?;
    println!("with acct_17 held elsewhere: {:?}", attempt.map(|_| "both"));
    let free = other.lock("acct_4").try_acquire().await?;
    println!("and acct_4 is free: {}", free.is_some());
    held.release().await?;
    Ok(())
}
