//! A leader-elected worker: three workers campaign for `orders_consumer`; the leader
//! consumes (writing with its term's fencing token) until it resigns, and the next takes
//! over at once. A dashboard follows who leads with `observe()`, without polling.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example leader_worker
//! ```

use std::time::Duration;

use distlock_examples::ExampleRedis;
use futures_util::StreamExt;
use lock_core::{LockClient, LockError};

const TERMS: usize = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;

    // The dashboard: every change of leader, as it happens.
    let dashboard = LockClient::new(redis.url())?;
    let mut changes = dashboard.election("orders_consumer").observe();
    let watching = tokio::spawn(async move {
        // The current state, then one change per term.
        for _ in 0..=TERMS {
            match changes.next().await.flatten() {
                Some(leader) => println!(
                    "dashboard: {} leads (term {})",
                    leader.value().unwrap_or("?"),
                    leader.fencing_token()
                ),
                None => println!("dashboard: nobody leads"),
            }
        }
    });

    let mut workers = Vec::new();
    for i in 0..TERMS {
        let locks = LockClient::new(redis.url())?;
        workers.push(tokio::spawn(async move {
            let election = locks
                .election("orders_consumer")
                .value(format!("worker-{i}"));
            let term = election.campaign().await?;
            let token = term.fencing_token();
            println!("worker-{i}: leading, term {token}");
            tokio::select! {
                () = term.lost() => println!("worker-{i}: term lost, stopping"),
                () = consume(i, token) => {}
            }
            // Hand over at once; the next worker in line takes the term.
            term.resign().await?;
            Ok::<_, LockError>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    watching.await?;
    Ok(())
}

/// The leader's work: each write carries the term's token, so the store can refuse a
/// paused ex-leader's late writes.
async fn consume(worker: usize, token: u64) {
    for batch in 0..3 {
        println!("worker-{worker}: batch {batch} written with token {token}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
