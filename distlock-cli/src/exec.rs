//! `distlock exec NAME -- COMMAND`: runs a command while holding a lock, so that it runs
//! once at a time across every host sharing the Redis (`flock(1)` for a fleet, as
//! `consul lock`), and stops it when the lock is lost.

mod child;
pub(crate) mod reaper;
mod signals;
mod status;

use std::ffi::OsString;
use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use lock_core::{LockClient, LockError, LockGuard, LockRequest, ReplicaAck};
use nix::sys::signal::Signal;
use tokio::time::Instant;

use self::child::Child;
use self::signals::Forwarded;
pub(crate) use self::status::FAILED;

/// What `distlock exec --help` explains beyond the options.
const ABOUT: &str = "\
Runs COMMAND while holding the lock NAME: once at a time across every host that uses the \
same Redis, as flock(1) does on one host.

distlock exec takes the lock (waiting for it unless told otherwise), starts COMMAND, keeps \
the lock renewed while COMMAND runs, releases it when COMMAND ends and exits with \
COMMAND's status.

If the lock is lost while COMMAND runs (a renewal finds it gone, an operator ran `distlock \
release --force NAME`, or this process was paused past its lease), COMMAND's process group \
gets SIGTERM, then SIGKILL after --kill-after, and distlock exec exits with 124. SIGINT, \
SIGTERM, SIGHUP and SIGQUIT sent to distlock exec are passed on to COMMAND's process group; \
the lock is released when COMMAND has ended. The same signals while distlock exec waits for \
the lock end the wait (128+N): distlock exec leaves the lock's queue before it exits, so \
the lock goes to the next waiter, not to this exited process.

Killed with SIGKILL (or dying otherwise) while COMMAND runs, distlock exec cannot release: \
the lock expires after its lease (--lease). A small companion process, `distlock \
exec-reaper`, sees it die at once and stops COMMAND's process group (SIGTERM, SIGKILL after \
--kill-after), so COMMAND does not run on without the lock's renewals. Processes that left \
that group (setsid, daemons) are not stopped, nor is anything if the companion was killed \
too.

COMMAND runs in a process group of its own, so that stopping it stops every process it \
started; it cannot read from the terminal. Its environment has:
  DISTLOCK_NAME           the lock's name
  DISTLOCK_FENCING_TOKEN  the fencing token of this hold (of this permit with --permits):
                          give it to what COMMAND writes to, to refuse an older holder's writes
  DISTLOCK_MODE           exclusive, read, write or permit

A cron job on every host, run by one of them per fire; a host whose clock or cron is up to \
a minute late finds that fire taken instead of running it again:
  */5 * * * * distlock --url redis://redis.internal:6379 exec --skip-if-busy --hold-at-least 60s nightly-report -- /usr/local/bin/report";

/// Runs a command while holding a lock (once across the fleet); stops it if the lock is lost.
#[derive(Debug, Args)]
#[command(long_about = ABOUT, after_long_help = status::HELP)]
pub(crate) struct Exec {
    #[command(flatten)]
    kind: Kind,
    /// Waits at most this long for the lock (`500ms`, `30s`, `5m`), then exits with the
    /// busy status without running COMMAND [default: until the lock is free].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    wait: Option<Duration>,
    /// Exits at once with the busy status, without running COMMAND, when the lock is held.
    #[arg(long, conflicts_with = "wait")]
    skip_if_busy: bool,
    /// The exit status when the lock stays busy (--skip-if-busy, or --wait ran out).
    #[arg(long, value_name = "N", default_value_t = status::BUSY)]
    busy_exit_code: u8,
    /// Keeps the lock until at least this long after it was taken, even when COMMAND ends
    /// sooner (ShedLock's lockAtLeastFor): distlock exec holds it until then before exiting
    /// (a signal ends that wait early). For schedules whose hosts fire up to this late.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    hold_at_least: Option<Duration>,
    /// The lock's lease, renewed every third of it while distlock exec lives: how long the
    /// name stays taken after distlock exec dies without releasing it [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub(crate) lease: Option<Duration>,
    /// Replicas that must have the lock before COMMAND starts: `auto` waits for one where
    /// the master serving the lock has a replica online (none where it has none), `off`
    /// never waits, N waits for N replicas whatever the master reports. When fewer
    /// acknowledge within --replica-timeout, the lock is released and distlock exec fails
    /// (125) without running COMMAND: a failover right after the acquisition could have
    /// handed the lock to a second process.
    #[arg(long, value_name = "auto|off|N", default_value = "auto", value_parser = replicas)]
    replicas: Replicas,
    /// How long to wait for the replicas of --replicas.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    replica_timeout: Duration,
    /// On a loss, the time between SIGTERM and SIGKILL to COMMAND's process group.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        value_parser = duration
    )]
    kill_after: Duration,
    /// The lock's name (without the key prefix).
    name: String,
    /// The command to run and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The longest duration an option takes (lock-core's longest lease): longer ones are
/// typos, and would overflow the clock's arithmetic.
const LONGEST: Duration = lock_core::LockClientBuilder::MAX_LEASE;

/// A duration option: `humantime`'s `500ms`, `30s`, `5m`, `1h 30m`, up to [`LONGEST`].
fn duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration > LONGEST {
        return Err(format!(
            "longer than {}",
            humantime::format_duration(LONGEST)
        ));
    }
    Ok(duration)
}

/// `--replicas`: what the acquisition waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replicas {
    Auto,
    Off,
    Count(usize),
}

/// `--replicas`: `auto`, `off` or a number of replicas (at least 1).
fn replicas(text: &str) -> Result<Replicas, String> {
    match text {
        "auto" => Ok(Replicas::Auto),
        "off" => Ok(Replicas::Off),
        _ => match text.parse::<usize>() {
            Ok(0) => Err("0 replicas: use `off`".to_owned()),
            Ok(n) => Ok(Replicas::Count(n)),
            Err(_) => Err("expected `auto`, `off` or a number of replicas".to_owned()),
        },
    }
}

/// Which hold to take: the exclusive lock unless one of these says otherwise.
#[derive(Debug, Args)]
#[group(multiple = false)]
struct Kind {
    /// Takes a permit of the semaphore NAME, of which at most N are held at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    permits: Option<u32>,
    /// Takes the read side of the read-write lock NAME (held beside other readers).
    #[arg(long)]
    read: bool,
    /// Takes the write side of the read-write lock NAME (held alone).
    #[arg(long)]
    write: bool,
}

impl Exec {
    /// The client's replica acknowledgement, from --replicas and --replica-timeout.
    pub(crate) fn replica_ack(&self) -> ReplicaAck {
        let timeout = self.replica_timeout;
        match self.replicas {
            Replicas::Auto => ReplicaAck::Auto { timeout },
            Replicas::Off => ReplicaAck::Off,
            Replicas::Count(replicas) => ReplicaAck::Require { replicas, timeout },
        }
    }

    /// The request for the hold these options describe.
    fn request(&self, client: &LockClient) -> LockRequest {
        let name = self.name.as_str();
        let request = match &self.kind {
            Kind {
                permits: Some(permits),
                ..
            } => client.semaphore(name, *permits),
            Kind { read: true, .. } => client.read_lock(name),
            Kind { write: true, .. } => client.write_lock(name),
            Kind { .. } => client.lock(name),
        };
        let request = match (self.skip_if_busy, self.wait) {
            (true, _) => request.wait(Duration::ZERO),
            (false, Some(wait)) => request.wait(wait),
            (false, None) => request.wait_forever(),
        };
        // For `distlock inspect`: which program holds it (not its arguments, which may
        // carry secrets).
        let program = Path::new(&self.command[0]);
        let program = program.file_name().unwrap_or(program.as_os_str());
        request.request_id(format!("exec {}", program.to_string_lossy()))
    }
}

/// Runs `exec`: takes the lock, runs the command under it, releases it; the exit status
/// is the command's, or one of [`status`]'s.
///
/// # Errors
/// What kept distlock exec from running the command (Redis unreachable, an invalid name,
/// no signal handler), passed through `explain`.
pub(crate) async fn run(
    client: &LockClient,
    exec: Exec,
    explain: impl Fn(LockError) -> crate::Error,
) -> Result<ExitCode, crate::Error> {
    // From the start: a signal while waiting ends the wait, not distlock alone later on.
    let mut signals = Forwarded::catch()?;
    let guard = match take(client, &exec, &mut signals).await {
        Ok(Ok(guard)) => guard,
        Ok(Err(LockError::WaitTimeout { .. })) => return Ok(exec.busy_exit_code.into()),
        Ok(Err(error)) => return Err(explain(error)),
        Err(signal) => {
            // The dropped acquisition's queue leave runs in the background: the runtime
            // must outlive it, or the entry stays and the holder's release hands the lock
            // to this dead process (for a whole lease). `shutdown` waits for it, bounded.
            if let Err(error) = client.shutdown().await {
                eprintln!("distlock exec: {error}; the queue entry expires by itself");
            }
            return Ok(status::killed_by(signal).into());
        }
    };
    let taken_at = Instant::now();
    let env = [
        ("DISTLOCK_NAME", exec.name.clone()),
        ("DISTLOCK_FENCING_TOKEN", guard.fencing_token().to_string()),
        ("DISTLOCK_MODE", guard.mode().to_string()),
    ];
    let child = match Child::spawn(&exec.command, env, exec.kill_after).await {
        Ok(child) => child,
        Err(error) => {
            let program = exec.command[0].to_string_lossy();
            eprintln!("distlock exec: cannot run {program}: {error}");
            release(guard).await;
            return Ok(status::not_started(&error).into());
        }
    };
    let mut lost = pin!(guard.lost());
    let Some(code) = supervise(child, &mut lost, &mut signals, &guard, exec.kill_after).await?
    else {
        return Ok(status::LOST.into());
    };
    if let Some(least) = exec.hold_at_least {
        linger(taken_at + least, &mut lost, &mut signals, &guard).await;
    }
    // Lost while lingering: said above, and there is nothing left to release.
    if guard.is_held() {
        release(guard).await;
    }
    Ok(code.into())
}

/// Waits for the lock, or for a signal: then the acquisition is dropped (it leaves the
/// queue in the background) and the signal is returned.
async fn take(
    client: &LockClient,
    exec: &Exec,
    signals: &mut Forwarded,
) -> Result<Result<LockGuard, LockError>, Signal> {
    tokio::select! {
        taken = exec.request(client).acquire() => Ok(taken),
        signal = signals.recv() => Err(signal),
    }
}

/// Runs `child` to its end, passing on the signals caught: its status, or `None` when the
/// lock was lost first (the child then stopped: SIGTERM, SIGKILL after `kill_after`).
///
/// # Errors
/// When waiting for the child fails.
async fn supervise(
    mut child: Child,
    lost: &mut (impl Future<Output = ()> + Unpin),
    signals: &mut Forwarded,
    guard: &LockGuard,
    kill_after: Duration,
) -> std::io::Result<Option<u8>> {
    loop {
        tokio::select! {
            // A loss seen together with the child's end is reported as a loss: the child's
            // last moments may have run without the lock.
            biased;
            () = &mut *lost => {
                eprintln!("distlock exec: {}; stopping the command", guard.lost_error());
                child.stop(kill_after).await?;
                return Ok(None);
            }
            ended = child.wait() => return Ok(Some(status::of(ended?))),
            signal = signals.recv() => child.signal(signal),
        }
    }
}

/// Keeps the lock (renewed) until `until`, for `--hold-at-least`; a signal or a loss ends
/// the wait early.
async fn linger(
    until: Instant,
    lost: &mut (impl Future<Output = ()> + Unpin),
    signals: &mut Forwarded,
    guard: &LockGuard,
) {
    tokio::select! {
        () = tokio::time::sleep_until(until) => {}
        () = lost => eprintln!("distlock exec: {} after the command ended", guard.lost_error()),
        _ = signals.recv() => {}
    }
}

/// Releases the lock after the command, saying on stderr when that failed: the command's
/// status stands either way.
async fn release(guard: LockGuard) {
    let name = guard.name().clone();
    match guard.release().await {
        Ok(()) => {}
        Err(LockError::NotHeld { .. }) => {
            eprintln!("distlock exec: the lock `{name}` was no longer held at its release");
        }
        Err(error) => {
            eprintln!("distlock exec: {error}; the lock `{name}` expires with its lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_auto_off_or_a_count() {
        assert_eq!(replicas("auto"), Ok(Replicas::Auto));
        assert_eq!(replicas("off"), Ok(Replicas::Off));
        assert_eq!(replicas("2"), Ok(Replicas::Count(2)));
        assert!(replicas("0").unwrap_err().contains("off"));
        assert!(replicas("some").is_err());
        // `--replica-timeout`'s default is lock-core's.
        assert_eq!(duration("1s"), Ok(ReplicaAck::DEFAULT_TIMEOUT));
    }

    #[test]
    fn durations_are_humantimes_up_to_a_year() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("365days"), Ok(LONGEST));
        assert!(duration("366days").unwrap_err().contains("longer than"));
        assert!(duration("soon").is_err());
    }
}
