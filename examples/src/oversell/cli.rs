//! The `oversell` command: its arguments, both runs, the table and the verdict.

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use super::{table, Error, Guard, Report, Settings};

/// Three inventory instances, one stock in Redis: local locks oversell, distlock does not,
/// and guarded writes do not even when a holder stalls past its lease.
#[derive(Debug, Parser)]
#[command(
    name = "oversell",
    version,
    about,
    after_help = "Redis: $REDIS_URL if set; else a private redis-server on a free loopback \
                  port, stopped at exit (also on Ctrl-C and SIGTERM)."
)]
pub struct Args {
    /// Initial stock of the item.
    #[arg(long, default_value_t = 100)]
    pub stock: i64,
    /// Purchase requests to fire in each run.
    #[arg(long, default_value_t = 1_000)]
    pub requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 100, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrency: usize,
    /// Service instances (each on its own loopback port, with its own Redis clients).
    #[arg(long, default_value_t = 3, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub instances: usize,
    /// How long a request waits for the item's lock, in seconds [default: long enough for
    /// the whole queue: 0.25 s per request in flight, at least 30 s].
    #[arg(long, value_name = "SECONDS")]
    pub lock_wait: Option<u64>,
    /// Stall one purchase in ten this long between its check and its write (a GC pause, a
    /// slow VM), with locks leased a third of it and not renewed: the plain write after the
    /// stall oversells, the guarded one is refused.
    #[arg(long, value_name = "MS")]
    pub stall_ms: Option<u64>,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

impl Args {
    /// Parses a command line (the program name first), as the `oversell` example does.
    ///
    /// # Errors
    /// clap's error for bad arguments, `--help` and `--version` (`exit()` prints it).
    pub fn from_command_line<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Self::try_parse_from(args)
    }

    /// The size of each run.
    pub fn settings(&self) -> Settings {
        Settings {
            stock: self.stock,
            requests: self.requests,
            concurrency: self.concurrency,
            instances: self.instances,
            lock_wait: self.lock_wait.map_or_else(
                || Settings::queue_wait(self.concurrency),
                Duration::from_secs,
            ),
            stall: self.stall_ms.map(Duration::from_millis),
        }
    }
}

/// Runs the demo against the Redis at `redis_url`, as the `oversell` example does: a run
/// with a local lock, a run with the distributed lock, a run with guarded writes, then the
/// table and the verdicts on `out` (failures go to stderr). Answers the exit status: 0 when
/// the locked runs sold exactly the stock, no more and no less
/// ([`Report::inexact`](super::Report::inexact)) — with `--stall-ms`, the guarded run —,
/// 1 when not or a run failed.
pub async fn run(args: &Args, redis_url: &str, out: &mut dyn Write) -> u8 {
    match both_runs(args, redis_url, out).await {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(error) => {
            eprintln!("oversell: {error}");
            1
        }
    }
}

/// The runs, the table and the verdicts; true when the locked runs were exact (with
/// `--stall-ms`, the guarded one: a plain write after a stall is expected to oversell).
async fn both_runs(args: &Args, redis_url: &str, out: &mut dyn Write) -> Result<bool, Error> {
    let settings = args.settings();
    writeln!(
        out,
        "{} instances, stock {}, {} purchase requests at concurrency {} (redis: {redis_url}){}\n",
        settings.instances,
        settings.stock,
        settings.requests,
        settings.concurrency,
        settings.stall.map_or(String::new(), |stall| format!(
            "; one purchase in ten stalls {stall:?} between its check and its write"
        )),
    )?;
    let mut reports = Vec::new();
    for guard in [Guard::LocalMutex, Guard::Distributed, Guard::Guarded] {
        let progress = (!args.quiet).then(|| bar(settings.requests, guard));
        let report = super::run(redis_url, &settings, guard, progress)
            .await
            .map_err(|e| format!("{}: {e}", guard.label()))?;
        reports.push(report);
    }
    write!(out, "{}", table(&reports))?;
    writeln!(out)?;
    let locked = verdict(out, "with the distributed lock", &reports[1], &settings)?;
    let guarded = verdict(out, "with guarded writes", &reports[2], &settings)?;
    Ok(guarded && (locked || settings.stall.is_some()))
}

/// Prints the verdict on one locked run; true when it sold exactly the stock.
fn verdict(
    out: &mut dyn Write,
    what: &str,
    report: &Report,
    settings: &Settings,
) -> Result<bool, Error> {
    let Some(why) = report.inexact() else {
        let per_request = if report.expected_sales() < report.initial_stock {
            " (one per request)"
        } else {
            ""
        };
        writeln!(
            out,
            "{what}: exactly {} sold{per_request}, oversold 0",
            report.accepted
        )?;
        return Ok(true);
    };
    writeln!(out, "{what}: NOT exact: {why}")?;
    if report.failed > 0 {
        writeln!(
            out,
            "(busy/err: answered 409 after waiting {:?} for the lock, or 5xx — a guarded write \
             refused after a stall —, or no answer; see --lock-wait)",
            settings.lock_wait
        )?;
    }
    Ok(false)
}

/// A progress bar on stderr for one run.
fn bar(len: usize, guard: Guard) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:24} [{bar:40}] {pos}/{len} {per_sec}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(guard.label());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bad sizes are refused by the parser, not turned into a run that cannot be exact.
    #[test]
    fn zero_concurrency_or_instances_is_an_argument_error() {
        for bad in [
            ["oversell", "--concurrency", "0"],
            ["oversell", "--instances", "0"],
        ] {
            assert!(Args::from_command_line(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_lock_wait_outlasts_the_queue() {
        let wait = |argv: &[&str]| Args::from_command_line(argv).unwrap().settings().lock_wait;
        assert_eq!(wait(&["oversell"]), Duration::from_secs(30));
        let crowd = ["oversell", "--concurrency", "1000"];
        assert_eq!(wait(&crowd), Duration::from_secs(250));
        let explicit = ["oversell", "--concurrency", "1000", "--lock-wait", "5"];
        assert_eq!(wait(&explicit), Duration::from_secs(5));
    }
}
