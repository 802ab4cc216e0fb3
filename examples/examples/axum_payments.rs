//! Exactly-once payments with lock-tower's `IdempotencyLayer`: a client library that
//! retries on timeouts sends the same `Idempotency-Key` on every attempt, and the service
//! charges once, whichever instance each attempt reaches.
//!
//! Needs a Redis the instances share, named by `REDIS_URL` (never one it merely finds on
//! 6379). `--demo` runs on its own: `REDIS_URL` if set, else a private `redis-server`.
//!
//! ```sh
//! # 3 instances; 30 customers whose first attempt times out (the server is slowed down
//! # for it), retried until answered; then the ledger is counted:
//! cargo run -p distlock-examples --example axum_payments -- --demo
//!
//! # One instance, by hand:
//! cargo run -p distlock-examples --example axum_payments -- --port 3001
//! curl -i -X POST http://127.0.0.1:3001/charges -H 'idempotency-key: k1' -H 'x-client: acme' \
//!      -H 'content-type: application/json' -d '{"account":"a1","cents":500}'   # 201
//! # the same again: 201 with `idempotency-replayed: true`, nothing charged;
//! # another body with k1: 422; k1 while the first is in flight (add -H 'x-delay-ms: 5000'
//! # to it): 409 with Retry-After.
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use distlock_examples::payments::client::{self, Answer, Retries};
use distlock_examples::payments::{app, ledger_key, ChargeRequest};
use distlock_examples::ExampleRedis;
use lock_core::LockClient;
use redis::AsyncCommands;
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A payment service that charges once per idempotency key.
#[derive(Debug, Parser)]
struct Args {
    /// Port on 127.0.0.1 [default: 3001; with --demo, 3 instances on free ports]
    #[arg(long)]
    port: Option<u16>,
    /// Run 30 retrying customers against 3 instances, count the charges, and exit.
    #[arg(long)]
    demo: bool,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let redis = if args.demo {
        ExampleRedis::from_env_or_start()?
    } else {
        ExampleRedis::from_env()?
    };
    let url = redis.url();
    let instances = if args.demo { 3 } else { 1 };
    let port = args.port.unwrap_or(if args.demo { 0 } else { 3001 });
    let mut addrs = Vec::new();
    for _ in 0..instances {
        // Each instance its own clients, as separate processes have.
        let locks = LockClient::new(url)?;
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        addrs.push(listener.local_addr()?);
        let app = app(locks, conn, Arc::new(|_| {}));
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    if args.demo {
        return demo(url, &addrs).await;
    }
    let shown = distlock_examples::redacted(url);
    println!("payments on {addrs:?} (Redis {shown}); Ctrl-C to stop");
    std::future::pending::<()>().await;
    Ok(())
}

/// 30 customers, each charging once through a client whose first attempt times out.
async fn demo(url: &str, addrs: &[SocketAddr]) -> Result<(), BoxError> {
    let run = uuid_like();
    let http = client::http();
    let retries = Retries {
        timeout: Duration::from_millis(500),
        attempts: 20,
        first_delay_ms: Some(800),
    };
    let customers: Vec<_> = (0..30)
        .map(|i| {
            let (http, addrs) = (http.clone(), addrs.to_vec());
            let charge = ChargeRequest {
                account: format!("demo-{run}-{i}"),
                cents: 100 + i,
            };
            tokio::spawn(async move {
                let key = format!("order-{run}-{i}");
                client::charge(&http, &addrs, "demo", &key, &charge, retries).await
            })
        })
        .collect();
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let (mut paid, mut charges, mut attempts, mut timeouts) = (0, 0, 0, 0);
    for (i, customer) in customers.into_iter().enumerate() {
        let (receipt, seen) = customer.await?;
        paid += usize::from(receipt.is_some());
        attempts += seen.len();
        timeouts += seen.iter().filter(|a| **a == Answer::TimedOut).count();
        let ledger: usize = conn.llen(ledger_key(&format!("demo-{run}-{i}"))).await?;
        charges += ledger;
    }
    println!(
        "30 customers: {paid} paid, {attempts} attempts ({timeouts} timed out), \
         {charges} charges in the ledgers"
    );
    if paid != 30 || charges != 30 {
        return Err("a customer was charged other than once".into());
    }
    Ok(())
}

/// A run id, so that demo runs against a shared Redis do not meet each other's keys.
fn uuid_like() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
