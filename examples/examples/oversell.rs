//! The oversell demo: three instances of an inventory service behind one address sell a
//! stock kept in Redis. With a lock local to each instance they oversell under load; with
//! `DistributedLockLayer` on the buy route they sell exactly the stock, every time.
//!
//! ```sh
//! cargo run --release -p distlock-examples --example oversell
//! cargo run --release -p distlock-examples --example oversell -- --stock 50 --requests 500
//! ```
//!
//! Uses `REDIS_URL` if set, else a Redis on 127.0.0.1:6379, else starts a private
//! `redis-server` on a free port (stopped at exit).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use distlock_examples::oversell::{self, Guard, Settings};
use distlock_examples::ExampleRedis;
use indicatif::{ProgressBar, ProgressStyle};

/// Three inventory instances, one stock in Redis: local locks oversell, distlock does not.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Initial stock of the item.
    #[arg(long, default_value_t = 100)]
    stock: i64,
    /// Purchase requests to fire in each run.
    #[arg(long, default_value_t = 1_000)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Service instances (each on its own loopback port, with its own Redis clients).
    #[arg(long, default_value_t = 3)]
    instances: usize,
    /// How long a request waits for the item's lock, in seconds.
    #[arg(long, default_value_t = 30)]
    lock_wait: u64,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let redis = match ExampleRedis::find_or_start() {
        Ok(redis) => redis,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let settings = Settings {
        stock: args.stock,
        requests: args.requests,
        concurrency: args.concurrency,
        instances: args.instances.max(1),
        lock_wait: Duration::from_secs(args.lock_wait),
    };
    println!(
        "{} instances, stock {}, {} purchase requests at concurrency {} (redis: {})\n",
        settings.instances,
        settings.stock,
        settings.requests,
        settings.concurrency,
        redis.url()
    );
    let mut reports = Vec::new();
    for guard in [Guard::LocalMutex, Guard::Distributed] {
        let progress = (!args.quiet).then(|| bar(settings.requests, guard));
        match oversell::run(redis.url(), &settings, guard, progress).await {
            Ok(report) => reports.push(report),
            Err(error) => {
                eprintln!("{}: {error}", guard.label());
                return ExitCode::FAILURE;
            }
        }
    }
    oversell::print_table(&reports);
    let locked = &reports[1];
    if locked.is_exact() {
        println!(
            "\nwith the distributed lock: exactly {} sold, oversold 0",
            locked.accepted
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "\nwith the distributed lock: NOT exact (oversold {})",
            locked.oversold()
        );
        ExitCode::FAILURE
    }
}

fn bar(len: usize, guard: Guard) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:26} [{bar:40}] {pos}/{len} {per_sec}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(guard.label());
    bar
}
