//! Fencing a Postgres row with the lock's token (`distlock_examples::fenced_postgres`): an
//! axum service whose `PUT /items/{id}/price` runs under a lock per item with a 2 s lease,
//! and writes the row with
//! `UPDATE items SET price_cents = $2, fence = $3 WHERE id = $1 AND fence <= $3`.
//! A request that outlives its lease finds a later request's token on the row: 0 rows,
//! nothing written, `409`.
//!
//! Needs a Postgres named by `DATABASE_URL` (it creates the `items` table and items 1 to
//! 10), and Redis: `REDIS_URL` if set, else a private `redis-server`. Several instances
//! (`--port`) must share both: one `DATABASE_URL` and one `REDIS_URL`. Without `REDIS_URL`
//! each starts a Redis of its own, and their locks never exclude each other.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1/postgres \
//!   cargo run -p distlock-examples --example axum_fenced_postgres
//! curl -X PUT 'http://127.0.0.1:3001/items/7/price?cents=250'   # 200, with its fence
//! # A request that stalls 3 s, past its 2 s lease, and one that comes meanwhile:
//! curl -i -X PUT 'http://127.0.0.1:3001/items/7/price?cents=1&slow_ms=3000' & sleep 0.2
//! curl -i -X PUT 'http://127.0.0.1:3001/items/7/price?cents=300' # 200 once the lease ends
//! # ... then the stalled one answers 409: the row keeps 300.
//! curl http://127.0.0.1:3001/items/7                             # {"price_cents":300,…}
//! ```

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use distlock_examples::fenced_postgres::{router, CREATE_TABLE};
use distlock_examples::ExampleRedis;
use lock_core::LockClient;
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The lease of each request's lock: short, so the demo's stalled request loses it.
const LEASE: Duration = Duration::from_secs(2);

/// An axum service that fences its Postgres writes with the lock's token.
#[derive(Debug, Parser)]
struct Args {
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 3001)]
    port: u16,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .ok_or("set DATABASE_URL to a Postgres, e.g. postgres://postgres@127.0.0.1/postgres")?;
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to DATABASE_URL: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("database connection ended: {e}");
        }
    });
    db.batch_execute(CREATE_TABLE).await?;
    db.execute(
        "INSERT INTO items (id, price_cents) SELECT g, 100 FROM generate_series(1, 10) g \
         ON CONFLICT (id) DO NOTHING",
        &[],
    )
    .await?;
    let redis = ExampleRedis::from_env_or_start()?;
    let locks = LockClient::new(redis.url())?;
    let app = router(locks.clone(), Arc::new(db), LEASE)?;
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    println!("items on {}; Ctrl-C to stop", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    locks.shutdown().await?;
    Ok(())
}
