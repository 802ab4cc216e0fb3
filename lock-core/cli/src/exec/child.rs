//! The command `distlock exec` runs: the leader of a process group of its own, so that a
//! signal meant for it reaches every process it started.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// A running command and its process group.
#[derive(Debug)]
pub(crate) struct Child {
    child: tokio::process::Child,
    group: Pid,
}

impl Child {
    /// Starts `argv` (program, then arguments) with `env` added to this process's
    /// environment, in a new process group led by the command.
    ///
    /// # Errors
    /// Why the program could not be started (not found, not executable, …).
    pub(crate) fn spawn<'a>(
        argv: &[OsString],
        env: impl IntoIterator<Item = (&'a str, String)>,
    ) -> io::Result<Self> {
        let Some((program, args)) = argv.split_first() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no command"));
        };
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
        Ok(Self { child, group })
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
        self.child.wait().await
    }

    /// Stops the command: SIGTERM to its group, then, if the command has not ended within
    /// `grace`, SIGKILL to its group and to the command (should it have left the group).
    pub(crate) async fn stop(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM);
        if let Ok(ended) = tokio::time::timeout(grace, self.child.wait()).await {
            return ended;
        }
        self.signal(Signal::SIGKILL);
        // Fails only when the command has just ended, which `wait` then reports.
        let _ = self.child.start_kill();
        self.child.wait().await
    }
}
