//! The payment service of the `axum_payments` example in its own process, for the
//! idempotency tests (`tests/tests/tower/idempotency.rs`), so they can run several
//! instances and SIGSTOP or SIGKILL one mid-request.
//!
//! ```text
//! payments <redis url> <lease ms>
//! ```
//!
//! Serves on a free loopback port and prints `LISTENING addr=<ip:port>`, then one line per
//! event of the service (`CHARGING key=… token=…`, `CHARGED key=… token=… outcome=…`). Exits
//! when stdin closes or its time bound passes.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use distlock_examples::payments::app;
use lock_core::LockClient;
use tokio::io::AsyncReadExt;

/// No instance outlives this, whatever the parent does.
const TIME_BOUND: Duration = Duration::from_secs(300);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, lease_ms] = &args[..] else {
        panic!("usage: payments <redis url> <lease ms>");
    };
    let lease = Duration::from_millis(lease_ms.parse().expect("lease ms"));
    let locks = LockClient::builder(url.as_str())
        .lease(lease)
        .command_timeout(Duration::from_secs(5))
        .build()
        .expect("lock client");
    let redis = redis::Client::open(url.as_str())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    say(&format!(
        "LISTENING addr={}",
        listener.local_addr().expect("addr")
    ));
    let app = app(locks, redis, Arc::new(|line| say(&line)));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let stdin_closed = async {
        let mut buf = [0; 64];
        let mut stdin = tokio::io::stdin();
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(TIME_BOUND, stdin_closed).await;
}
