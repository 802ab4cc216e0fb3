//! The command `distlock exec` runs: the leader of a process group of its own, so that a
//! signal meant for it reaches every process it started, watched by a [`Reaper`] that stops
//! that group should `distlock exec` die first.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::reaper::Reaper;

/// A running command and its process group.
#[derive(Debug)]
pub(crate) struct Child {
    child: tokio::process::Child,
    group: Pid,
    /// Until the command has ended (`None` if it could not be started: then a killed
    /// `distlock exec` leaves the command running, as before the reaper).
    reaper: Option<Reaper>,
}

impl Child {
    /// Starts `argv` (program, then arguments) with `env` added to this process's
    /// environment, in a new process group led by the command, and a reaper that stops that
    /// group (SIGTERM, SIGKILL after `kill_after`) if this process dies while it runs.
    ///
    /// # Errors
    /// Why the program could not be started (not found, not executable, …).
    pub(crate) async fn spawn<'a>(
        argv: &[OsString],
        env: impl IntoIterator<Item = (&'a str, String)>,
        kill_after: Duration,
    ) -> io::Result<Self> {
        let Some((program, args)) = argv.split_first() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no command"));
        };
        // Before the command: a death of this process right after the command's start is
        // covered too, except between the fork and the write below (microseconds).
        let reaper = Reaper::spawn(kill_after).map_err(|error| {
            eprintln!(
                "distlock exec: cannot start the reaper ({error}): if distlock exec is \
                 killed, the command runs on"
            );
        });
        let child = tokio::process::Command::new(program)
            .args(args)
            .envs(env)
            // A group of its own: a shell script's children get the SIGTERM of a loss too
            // (a signal to the shell alone would leave them running without the lock), and
            // a terminal's Ctrl-C reaches the command once, through distlock's forwarding.
            .process_group(0)
            .spawn()?;
        let id = child.id().expect("a child not yet waited for has an id");
        let group = Pid::from_raw(i32::try_from(id).expect("pids fit in pid_t"));
        let mut reaper = reaper.ok();
        if let Some(watching) = &mut reaper {
            if let Err(error) = watching.watch(group).await {
                eprintln!(
                    "distlock exec: the reaper is gone ({error}): if distlock exec is \
                     killed, the command runs on"
                );
                reaper = None;
            }
        }
        Ok(Self {
            child,
            group,
            reaper,
        })
    }

    /// Sends `signal` to every process of the command's group.
    pub(crate) fn signal(&self, signal: Signal) {
        // ESRCH only: the whole group has ended meanwhile, and there is no one left to tell.
        let _ = killpg(self.group, signal);
    }

    /// Waits for the command to end.
    ///
    /// # Cancel safety
    /// Cancel safe (tokio's `Child::wait`): a later call waits on.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let ended = self.child.wait().await;
        self.ended();
        ended
    }

    /// The command has ended (or cannot be waited for): the reaper must not stop its group
    /// any more, whose id the system may give to another process once it is empty.
    fn ended(&mut self) {
        if let Some(reaper) = self.reaper.take() {
            reaper.dismiss();
        }
    }

    /// Stops the command: SIGTERM to its group, then, if the command has not ended within
    /// `grace`, SIGKILL to its group and to the command (should it have left the group).
    pub(crate) async fn stop(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM);
        if let Ok(ended) = tokio::time::timeout(grace, self.wait()).await {
            return ended;
        }
        self.signal(Signal::SIGKILL);
        // Fails only when the command has just ended, which `wait` then reports.
        let _ = self.child.start_kill();
        self.wait().await
    }
}
