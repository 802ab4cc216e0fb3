//! `distlock`: inspect, list, force-release and watch distlock (and Redisson) locks, and run
//! a command under one (`exec`).
//!
//! ```text
//! cargo install --locked --path distlock-cli   # or: cargo install distlock-cli, once published
//! distlock --url redis://10.0.0.5:6379 list
//! distlock inspect item_7
//! distlock release --force item_7
//! distlock watch --interval 500
//! distlock --cluster --url redis://10.0.0.1:7000 --url redis://10.0.0.2:7000 list
//! distlock --redlock --url redis://10.0.0.1 --url redis://10.0.0.2 --url redis://10.0.0.3 list
//! distlock --sentinel mymaster --url redis://10.0.0.1:26379 --url redis://10.0.0.2:26379 list
//! distlock --url redis://admin@10.0.0.5:6379 functions load
//! distlock --url redis://admin@10.0.0.5:6379 functions list
//! distlock --url redis://admin@10.0.0.5:6379 functions remove --older
//! distlock exec --skip-if-busy --hold-at-least 60s nightly-report -- /usr/local/bin/report
//! distlock exec --replicas 2 --replica-timeout 3s nightly-report -- /usr/local/bin/report
//! ```

#[cfg(unix)]
mod exec;
mod functions;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lock_core::{LockClient, LockClientBuilder, LockError};

use crate::functions::Functions;

/// Operate distlock locks: see who holds them, since when, release stuck ones, and run a
/// command under one.
#[derive(Debug, Parser)]
#[command(name = "distlock", version, next_help_heading = "Global options")]
struct Cli {
    /// Redis URL (`redis://`, `rediss://`, `redis://user:password@host:port/db`), taken
    /// whole (commas included). Repeat it for several nodes: the seeds of `--cluster`, the
    /// masters of `--redlock`, the Sentinels of `--sentinel`.
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        value_name = "URL"
    )]
    url: Vec<String>,
    /// A Redis Cluster, found through the `--url` seed nodes.
    #[arg(long, global = true, conflicts_with_all = ["redlock", "sentinel"])]
    cluster: bool,
    /// Redlock: the `--url` values are independent masters, read by majority.
    #[arg(long, global = true, conflicts_with = "sentinel")]
    redlock: bool,
    /// The master that the `--url` Sentinels name for this service.
    #[arg(long, global = true, value_name = "SERVICE")]
    sentinel: Option<String>,
    /// Trusts this CA certificate (PEM file) for `rediss://` URLs, for servers with a
    /// private CA (lock-core does not pass it to Sentinel connections).
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "sentinel")]
    tls_ca: Option<PathBuf>,
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
    /// Deletes a lock whoever holds it; the next waiter gets it, and the old holder's client
    /// is told at once (its guard reports the lock lost; lock-tower aborts its request). A
    /// holder that did not hear it (no distlock client, or its pub/sub down) works on until
    /// its next renewal: the output says which.
    Release {
        /// Required: a forced release breaks mutual exclusion for the current holder.
        #[arg(long, required = true)]
        force: bool,
        /// The lock's name (without the key prefix).
        name: String,
    },
    /// A live view of held locks and their waiters, refreshed every interval; a failed
    /// refresh is reported on stderr and retried at the next one.
    Watch {
        /// Name prefix; glob characters match only themselves.
        #[arg(default_value = "")]
        name_prefix: String,
        /// Milliseconds between refreshes.
        #[arg(long, default_value_t = 1000)]
        interval: u64,
        /// Stop after this many refreshes, failed ones included (default: until
        /// interrupted); exits non-zero when the last one failed.
        #[arg(long)]
        count: Option<u64>,
    },
    #[cfg(unix)]
    Exec(exec::Exec),
    /// Internal: stops the command of a `distlock exec` that died (started by it).
    #[cfg(unix)]
    #[command(name = exec::reaper::SUBCOMMAND, hide = true)]
    ExecReaper(exec::reaper::ReaperArgs),
    /// distlock's Redis Functions library, for operators: load this version ahead of
    /// the services, list the versions on the servers, remove those no service calls.
    #[command(subcommand)]
    Functions(Functions),
}

impl Command {
    /// The exit status when the command fails with an error.
    fn failure(&self) -> ExitCode {
        match self {
            #[cfg(unix)]
            Self::Exec(_) => exec::FAILED.into(),
            _ => ExitCode::FAILURE,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Blocking, without a runtime or a client: it only waits on a pipe and sends signals.
    #[cfg(unix)]
    if let Command::ExecReaper(reaper) = &cli.command {
        return reaper.run();
    }
    let failure = cli.command.failure();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return failure;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            failure
        }
    }
}

type Error = Box<dyn std::error::Error>;

/// A client for the topology the flags name.
fn client(cli: &Cli) -> Result<LockClient, Error> {
    // Only `exec` acquires: its lease and replica acknowledgement.
    let (lease, replica_ack) = match &cli.command {
        #[cfg(unix)]
        Command::Exec(exec) => (exec.lease, Some(exec.replica_ack())),
        _ => (None, None),
    };
    let urls = cli.url.clone();
    let builder = if cli.cluster {
        LockClient::cluster(urls)
    } else if cli.redlock {
        LockClient::redlock(urls)
    } else if let Some(service) = &cli.sentinel {
        LockClient::sentinel(urls, service.as_str())
    } else {
        let Ok([url]) = <[String; 1]>::try_from(urls) else {
            return Err("several --url values need --cluster, --redlock or --sentinel".into());
        };
        LockClient::builder(url)
    };
    let builder = match &cli.tls_ca {
        Some(path) => builder.tls_root_certificate(
            std::fs::read(path)
                .map_err(|e| format!("cannot read --tls-ca {}: {e}", path.display()))?,
        ),
        None => builder,
    };
    let builder = match lease {
        Some(lease) => builder.lease(lease),
        None => builder,
    };
    let builder = match replica_ack {
        Some(ack) => builder.replica_ack(ack),
        None => builder,
    };
    Ok(builder
        .key_prefix(cli.prefix.clone())
        .service_name("distlock-cli")
        .build()?)
}

/// Runs the subcommand: its exit status, or the error that ended it.
async fn run(cli: Cli) -> Result<ExitCode, Error> {
    let client = client(&cli)?;
    let json = cli.json;
    let explain = |error| explain(error, &cli.url);
    match cli.command {
        Command::Inspect { name } => {
            let state = client.inspect(name).await.map_err(explain)?;
            render::print(json, &render::state_json(&state), || {
                render::state_text(&state)
            });
        }
        Command::List { name_prefix } => {
            let locks = client.list(&name_prefix).await.map_err(explain)?;
            render::print(json, &render::list_json(&locks), || render::table(&locks));
        }
        Command::Release { force, name } => {
            debug_assert!(force, "clap requires --force");
            let before = client.inspect(name.as_str()).await.map_err(explain)?;
            let released = client.force_release_notified(name.as_str()).await;
            let released = released.map_err(explain)?;
            render::print(json, &render::released_json(&before, released), || {
                render::released_text(&before, released)
            });
        }
        Command::Watch {
            name_prefix,
            interval,
            count,
        } => watch(&client, &cli.url, &name_prefix, json, interval, count).await?,
        #[cfg(unix)]
        Command::Exec(exec) => return exec::run(&client, exec, explain).await,
        #[cfg(unix)]
        Command::ExecReaper(_) => unreachable!("run by main, before the runtime"),
        Command::Functions(command) => {
            let nodes = functions::Nodes {
                urls: &cli.url,
                sentinel: cli.sentinel.as_deref(),
            };
            functions::run(&client, command, &nodes, json).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An outage is about the server, not the lock the command happened to name: `cannot
/// reach Redis at redis://127.0.0.1:6379 (connection refused); pass --url or set
/// REDIS_URL`, the URLs without their passwords. Other errors are kept as they are.
fn explain(error: LockError, urls: &[String]) -> Error {
    let servers = urls.iter().map(|url| redacted(url)).collect::<Vec<_>>();
    let servers = servers.join(", ");
    let unreachable = |cause: &dyn std::fmt::Display| -> Error {
        format!("cannot reach Redis at {servers} ({cause}); pass --url or set REDIS_URL").into()
    };
    match &error {
        LockError::Unavailable { source, .. } if source.is_connection_refusal() => {
            unreachable(&"connection refused")
        }
        LockError::Unavailable { source, .. } if source.is_io_error() => unreachable(source),
        LockError::Unavailable { source, .. } => {
            format!("Redis at {servers} is unavailable: {source}").into()
        }
        LockError::Timeout { after, .. } => unreachable(&format!("no answer within {after:?}")),
        _ => error.into(),
    }
}

/// `url` without the user and password it may carry (`redis://app:pw@host` → `redis://host`);
/// text that is no Redis URL is shown only from its last `@` on.
fn redacted(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(mut parsed) => {
            // Only fails for URLs without a host (unix sockets), which carry no user.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        None => match url.rsplit_once('@') {
            Some((_, host)) => format!("…@{host}"),
            None => url.to_owned(),
        },
    }
}

/// `watch`: lists the locks every `interval` ms, showing those held or with waiters; a
/// failed refresh is reported and retried at the next interval. Fails when the last of
/// `count` refreshes failed.
async fn watch(
    client: &LockClient,
    urls: &[String],
    name_prefix: &str,
    json: bool,
    interval: u64,
    count: Option<u64>,
) -> Result<(), Error> {
    let interval = Duration::from_millis(interval.max(50));
    for refresh in 1.. {
        let last = count.is_some_and(|c| refresh >= c);
        match client.list(name_prefix).await.map_err(|e| explain(e, urls)) {
            Ok(mut locks) => {
                locks.retain(|l| l.is_held() || l.waiters() > 0);
                render::watch_frame(json, &locks);
            }
            Err(error) if last => {
                eprintln!("error: refresh failed: {error}");
                return Err("the last refresh failed".into());
            }
            Err(error) => {
                eprintln!("error: refresh failed: {error} (retrying in {interval:?})");
            }
        }
        if last {
            break;
        }
        tokio::time::sleep(interval).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn redacted_urls_keep_no_password() {
        assert_eq!(
            redacted("redis://ops:pa,ss@10.0.0.5:6379/2"),
            "redis://10.0.0.5:6379/2"
        );
        assert_eq!(redacted("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redacted("nonsense:pw@host"), "…@host");
    }
}
