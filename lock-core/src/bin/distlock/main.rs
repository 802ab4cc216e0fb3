//! `distlock`: inspect, list, force-release and watch distlock (and Redisson) locks.
//!
//! ```text
//! cargo install lock-core --features cli
//! distlock --url redis://10.0.0.5:6379 list
//! distlock inspect item_7
//! distlock release --force item_7
//! distlock watch --interval 500
//! ```

mod render;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lock_core::{LockClient, LockClientBuilder, LockError};

/// Operate distlock locks: see who holds them, since when, and release stuck ones.
#[derive(Debug, Parser)]
#[command(name = "distlock", version)]
struct Cli {
    /// Redis URL (`redis://`, `rediss://`, `redis://user:password@host:port/db`); with
    /// `--cluster`, a seed node, repeatable or comma-separated.
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        value_delimiter = ','
    )]
    url: Vec<String>,
    /// Connect to a Redis Cluster through the `--url` seed nodes.
    #[arg(long, global = true)]
    cluster: bool,
    /// Key prefix of the locks, as configured in the services (`""` for Redisson's bare names).
    #[arg(long, global = true, default_value = LockClientBuilder::DEFAULT_KEY_PREFIX)]
    prefix: String,
    /// Machine-readable output: one JSON document (one per refresh for `watch`).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Shows one lock: holder, since when, lease left, fencing token, waiters.
    Inspect {
        /// The lock's name (without the key prefix).
        name: String,
    },
    /// Lists the locks whose names start with a prefix (all by default).
    List {
        /// Name prefix; glob characters match only themselves.
        #[arg(default_value = "")]
        name_prefix: String,
    },
    /// Deletes a lock whoever holds it; the next waiter gets it, the old holder's guard
    /// reports it lost at its next renewal.
    Release {
        /// Required: a forced release breaks mutual exclusion for the current holder.
        #[arg(long, required = true)]
        force: bool,
        /// The lock's name (without the key prefix).
        name: String,
    },
    /// A live view of held locks and their waiters, refreshed every interval.
    Watch {
        /// Name prefix; glob characters match only themselves.
        #[arg(default_value = "")]
        name_prefix: String,
        /// Milliseconds between refreshes.
        #[arg(long, default_value_t = 1000)]
        interval: u64,
        /// Stop after this many refreshes (default: until interrupted).
        #[arg(long)]
        count: Option<u64>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), LockError> {
    let builder = if cli.cluster {
        LockClient::cluster(cli.url.clone())
    } else {
        let [url] = cli.url.as_slice() else {
            return Err(LockError::InvalidConfig {
                reason: "several --url values need --cluster".to_owned(),
            });
        };
        LockClient::builder(url)
    };
    let client = builder
        .key_prefix(cli.prefix.clone())
        .service_name("distlock-cli")
        .build()?;
    let json = cli.json;
    match cli.command {
        Command::Inspect { name } => {
            let state = client.inspect(name).await?;
            render::print(json, &render::state_json(&state), || {
                render::state_text(&state)
            });
        }
        Command::List { name_prefix } => {
            let locks = client.list(&name_prefix).await?;
            render::print(json, &render::list_json(&locks), || render::table(&locks));
        }
        Command::Release { force, name } => {
            debug_assert!(force, "clap requires --force");
            let before = client.inspect(name.as_str()).await?;
            let released = client.force_release(name.as_str()).await?;
            render::print(json, &render::released_json(&before, released), || {
                render::released_text(&before, released)
            });
        }
        Command::Watch {
            name_prefix,
            interval,
            count,
        } => {
            let interval = Duration::from_millis(interval.max(50));
            for refresh in 1.. {
                let locks = client.list(&name_prefix).await?;
                let held: Vec<_> = locks.into_iter().filter(|l| l.is_held()).collect();
                render::watch_frame(json, &held);
                if count.is_some_and(|c| refresh >= c) {
                    break;
                }
                tokio::time::sleep(interval).await;
            }
        }
    }
    Ok(())
}
