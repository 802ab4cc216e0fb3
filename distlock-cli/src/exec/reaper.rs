//! The reaper: a small `distlock exec-reaper` process beside the command, which stops the
//! command's process group when `distlock exec` dies without doing so (SIGKILL, the OOM
//! killer, a crash), so that the command never runs on without the lock's renewals.
//!
//! It learns of the death from a pipe, not from a signal: `distlock exec` holds the pipe's
//! only write end, and the kernel closes it when `distlock exec` ends in any way, so the
//! reaper reads end-of-file at once. This needs no `unsafe` (`PR_SET_PDEATHSIG` would need
//! a `pre_exec` hook, and fires when the forking *thread* ends, not the process) and works
//! on every Unix. `PR_SET_PDEATHSIG` on the command alone would not do: it is cleared at
//! fork, so the command's own children (a shell script's `sleep 600 &`) would live on.
//!
//! The protocol: `distlock exec` starts the reaper, then the command, and writes the
//! command's process group id and a newline to the pipe. While the command runs, nothing
//! more. When the command has ended, `distlock exec` kills the reaper (SIGKILL) before it
//! closes the pipe, so a normal end stops nothing. End-of-file after the group id means
//! `distlock exec` died: the reaper sends SIGTERM to the group, and SIGKILL after the
//! `--kill-after` grace if some of it still runs. End-of-file before it means `distlock
//! exec` died before the command started: there is nothing to stop.
//!
//! What it cannot stop: processes that left the command's group (`setsid`, a double fork
//! into a new group, a daemon), and anything when the reaper itself was killed first (it
//! runs in a process group of its own, so a terminal's signals and `kill -- -PGID` of the
//! job's group do not reach it).

use std::io::{self, BufRead, Read};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, Command};

/// The hidden subcommand's name.
pub(crate) const SUBCOMMAND: &str = "exec-reaper";

/// How often the reaper looks whether the group has ended, between SIGTERM and SIGKILL.
const POLL: Duration = Duration::from_millis(10);

/// `distlock exec`'s side: the running reaper, and the pipe whose end tells it to act.
#[derive(Debug)]
pub(crate) struct Reaper {
    process: tokio::process::Child,
    /// Kept open until the reaper is dismissed: its closing is the reaper's signal.
    pipe: ChildStdin,
}

impl Reaper {
    /// Starts the reaper, which stops the group it is given after `kill_after` when this
    /// process dies. It is this very program, run as `distlock exec-reaper`.
    ///
    /// # Errors
    /// When it cannot be started (the program file is gone, no processes left).
    pub(crate) fn spawn(kill_after: Duration) -> io::Result<Self> {
        // Linux: the running program's file even when it was replaced or deleted since.
        #[cfg(target_os = "linux")]
        let program = std::path::PathBuf::from("/proc/self/exe");
        #[cfg(not(target_os = "linux"))]
        let program = std::env::current_exe()?;
        let mut process = Command::new(program)
            .arg0("distlock")
            .arg(SUBCOMMAND)
            .arg("--kill-after-ms")
            .arg(kill_after.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            // A group of its own: the terminal's Ctrl-C and a `kill -- -PGID` of the job
            // that kill `distlock exec` do not kill its reaper too.
            .process_group(0)
            .spawn()?;
        let pipe = process.stdin.take().expect("stdin is piped");
        Ok(Self { process, pipe })
    }

    /// Tells the reaper the command's process group, to stop should this process die.
    ///
    /// # Errors
    /// When the reaper is gone (then nothing protects the command).
    pub(crate) async fn watch(&mut self, group: Pid) -> io::Result<()> {
        let line = format!("{group}\n");
        self.pipe.write_all(line.as_bytes()).await?;
        self.pipe.flush().await
    }

    /// Ends the reaper without it stopping anything: the command has ended. SIGKILL first,
    /// while the pipe is still open, so that it never reads the end-of-file.
    pub(crate) fn dismiss(mut self) {
        // Fails only when the reaper has already ended (killed by someone else).
        let _ = self.process.start_kill();
        // Dropped after the kill: tokio reaps the process in the background.
        drop(self.pipe);
    }
}

/// The reaper's side: `distlock exec-reaper`, run by `distlock exec` only.
#[derive(Debug, Args)]
pub(crate) struct ReaperArgs {
    /// Milliseconds between SIGTERM and SIGKILL to the group.
    #[arg(long)]
    kill_after_ms: u64,
}

impl ReaperArgs {
    /// Waits for `distlock exec` to go (end-of-file on stdin), then stops the group it
    /// named. Its status says nothing to anyone: `distlock exec` never waits for it.
    pub(crate) fn run(&self) -> ExitCode {
        let mut stdin = io::stdin().lock();
        let mut line = String::new();
        let group = match stdin.read_line(&mut line) {
            Ok(_) => line.trim().parse::<i32>().ok().map(Pid::from_raw),
            Err(_) => None,
        };
        // Died before the command started (or spoke nonsense): nothing to stop.
        let Some(group) = group.filter(|group| group.as_raw() > 1) else {
            return ExitCode::SUCCESS;
        };
        // Nothing more comes until the end: the write end's closing, distlock exec's death.
        let _ = io::copy(&mut stdin.by_ref(), &mut io::sink());
        stop(group, Duration::from_millis(self.kill_after_ms));
        ExitCode::SUCCESS
    }
}

/// SIGTERM to `group`, then SIGKILL if it has not ended within `grace`.
fn stop(group: Pid, grace: Duration) {
    if killpg(group, Signal::SIGTERM) == Err(Errno::ESRCH) {
        return;
    }
    eprintln!(
        "distlock exec: ended while its command ran; stopping the command's process group \
         {group} (SIGTERM, SIGKILL after {grace:?})"
    );
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        // ESRCH: no process is left in the group.
        if killpg(group, None) == Err(Errno::ESRCH) {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = killpg(group, Signal::SIGKILL);
}
