//! How distlock scales, beside the `SET NX PX` baseline and Redisson's scripts, in one run
//! against one private Redis (see BENCHMARKS.md, "Scaling"):
//!
//! - waiters on one name, 4 → 1,024, spread over several processes (each a child of this
//!   bench), each taking and giving back the name as fast as it can for a capped window:
//!   acquisitions/s (every one a hand-off for distlock, whose queue is FIFO), fairness, Redis µs per acquisition (`INFO commandstats` and `used_cpu`),
//!   client memory per waiter, keys in Redis;
//! - names held at once, 1 → 10,000, by one process: cycles/s, Redis µs per acquire +
//!   release, client memory and keys per held name.
//!
//! Each kind of hold has its line (exclusive, read-write, semaphore). The figure is written
//! as SVG (default `examples/bench/src/scaling/scaling.svg`).
//!
//! ```sh
//! cargo run --release -p distlock-bench --bin bench_scaling              # ~5 min
//! cargo run --release -p distlock-bench --bin bench_scaling -- --quick   # ~1 min
//! ```

// Shared with `bench`, which uses all of it.
#[path = "../scaling/plot.rs"]
mod plot;
#[path = "../scaling/run.rs"]
mod run;
#[allow(dead_code)]
#[path = "../server.rs"]
mod server;
#[path = "../scaling/worker.rs"]
mod worker;

use clap::Parser;

/// Command line of the parent and of its children.
#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// Smaller points and shorter windows.
    #[arg(long)]
    quick: bool,
    /// Waiters on one name (comma-separated).
    #[arg(long, value_delimiter = ',')]
    waiters: Option<Vec<usize>>,
    /// Names held at once (comma-separated).
    #[arg(long, value_delimiter = ',')]
    names: Option<Vec<usize>>,
    /// Processes the waiters are spread over.
    #[arg(long, default_value_t = 4)]
    procs: usize,
    /// Seconds each contended point is measured (capped: a point ends within this plus
    /// every waiter's last turn, or is cut off after 90 s more).
    #[arg(long)]
    secs: Option<f64>,
    /// Contenders: lock, write, sem, baseline, redisson.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lock,write,sem,baseline,redisson"
    )]
    contenders: Vec<String>,
    /// Holders of many names: lock, read, sem, baseline, redisson.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lock,read,sem,baseline,redisson"
    )]
    holders: Vec<String>,
    /// Where the figure goes.
    #[arg(long, default_value = "examples/bench/src/scaling/scaling.svg")]
    svg: String,
    /// Internal: run as a child (`contend` or `hold`).
    #[arg(long, hide = true)]
    child: Option<String>,
    #[arg(long, hide = true)]
    lib: Option<String>,
    #[arg(long, hide = true)]
    url: Option<String>,
    #[arg(long, hide = true, default_value_t = 1)]
    count: usize,
    #[arg(long, hide = true, default_value = "p0")]
    id: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(role) = args.child.as_deref() {
        let lib = worker::Lib::parse(args.lib.as_deref().unwrap_or("")).ok_or("--lib")?;
        let url = args.url.as_deref().ok_or("--url")?;
        match role {
            "contend" => {
                worker::contend(
                    lib,
                    url,
                    "contended",
                    args.count,
                    args.secs.unwrap_or(1.0),
                    &args.id,
                )
                .await
            }
            _ => worker::hold(lib, url, args.count, &args.id).await,
        }
        return Ok(());
    }
    run::parent(args).await
}
