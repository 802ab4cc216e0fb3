//! The oversell demo: three instances of an inventory service behind one address sell a
//! stock kept in Redis. With a lock local to each instance they oversell under load; with
//! `DistributedLockLayer` on the buy route they sell exactly the stock, every time. The third
//! run keeps the stock beside the lock and takes each unit with a guarded `DECR`: with
//! `--stall-ms`, one purchase in ten stalls past its lease between its check and its write,
//! and only the guarded run still sells exactly the stock.
//!
//! ```sh
//! cargo run --release -p distlock-examples --example oversell
//! cargo run --release -p distlock-examples --example oversell -- --stock 50 --requests 500
//! cargo run --release -p distlock-examples --example oversell -- --stall-ms 900
//! ```
//!
//! Uses `REDIS_URL` if set, else starts a private `redis-server` on a free loopback port
//! (stopped at exit, also on Ctrl-C and SIGTERM); never a Redis it merely finds on 6379.
//! Its three instances run in this process and share that Redis (and the stock in it).
//! Exits 0 when the locked runs sold exactly the stock (with `--stall-ms`, the guarded
//! one), 1 when not, 130 (SIGINT) or 143 (SIGTERM)
//! when interrupted.

use std::future::Future;
use std::io;
use std::process::ExitCode;

use clap::Parser;

use distlock_examples::oversell::cli::{self, Args};
use distlock_examples::ExampleRedis;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Before a private server exists: from here on a signal stops it instead of the
    // process, and its `Drop` (on every way out of `main`) kills it.
    let interrupted = match interrupts() {
        Ok(interrupted) => interrupted,
        Err(error) => {
            eprintln!("cannot listen for signals: {error}");
            return ExitCode::FAILURE;
        }
    };
    let redis = match ExampleRedis::from_env_or_start() {
        Ok(redis) => redis,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = io::stdout();
    tokio::select! {
        status = cli::run(&args, redis.url(), &mut stdout) => ExitCode::from(status),
        (signal, status) = interrupted => {
            let private = redis.pid().is_some();
            drop(redis);
            eprintln!(
                "\ninterrupted by {signal}{}",
                if private { ": stopped the private redis-server" } else { "" }
            );
            ExitCode::from(status)
        }
    }
}

/// Resolves on SIGINT or SIGTERM with the signal's name and the conventional exit status
/// (128 + its number). The handlers are installed before this returns.
#[cfg(unix)]
fn interrupts() -> io::Result<impl Future<Output = (&'static str, u8)>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => ("SIGINT", 130),
            _ = term.recv() => ("SIGTERM", 143),
        }
    })
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
fn interrupts() -> io::Result<impl Future<Output = (&'static str, u8)>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
        ("Ctrl-C", 130)
    })
}
