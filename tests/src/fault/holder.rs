//! [`HolderProcess`]: a lock holder in a child process (the `holder` binary of this package),
//! so a test can SIGSTOP, SIGCONT and SIGKILL it like a paused or crashed service.
//!
//! The child reports on stdout, one line per event (`ACQUIRED token=…`, `EXIT holder=… …`);
//! the parent reads the lines and writes commands to the child's stdin. The child exits when
//! its stdin closes, and is SIGKILLed when the handle is dropped (also on a failing test).

use std::collections::HashMap;
use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long a SIGSTOP may take to show in `/proc` before we give up.
const STOP_BOUND: Duration = Duration::from_secs(5);

/// The `key=value` fields of a reported line (other words are skipped).
pub fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// A running child holder.
pub struct HolderProcess {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// Lines read so far, for failure messages.
    seen: Vec<String>,
}

impl fmt::Debug for HolderProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HolderProcess")
            .field("pid", &self.pid)
            .field("seen", &self.seen.len())
            .finish_non_exhaustive()
    }
}

impl HolderProcess {
    /// Starts `bin` (pass `env!("CARGO_BIN_EXE_holder")`) with `args`.
    ///
    /// # Panics
    /// If the binary cannot be started (outside a Tokio runtime, too).
    pub fn spawn(bin: &str, args: &[String]) -> HolderProcess {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin} {args:?}: {e}"));
        let pid = child.id().expect("a just-spawned child has a pid");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        HolderProcess {
            stdin: child.stdin.take(),
            child,
            pid,
            lines,
            seen: Vec::new(),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn nix_pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.pid).expect("pids fit in i32"))
    }

    /// Waits up to `bound` for the next line starting with `prefix`, skipping others.
    ///
    /// # Panics
    /// When no such line comes in time or the child closes its stdout first; the message
    /// lists the lines seen.
    pub async fn expect(&mut self, prefix: &str, bound: Duration) -> String {
        let found = tokio::time::timeout(bound, async {
            while let Some(line) = self.lines.recv().await {
                self.seen.push(line.clone());
                if line.starts_with(prefix) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            Ok(None) => panic!(
                "holder {} exited before `{prefix}`; it said: {:?}",
                self.pid, self.seen
            ),
            Err(_) => panic!(
                "holder {}: no `{prefix}` within {bound:?}; it said: {:?}",
                self.pid, self.seen
            ),
        }
    }

    /// Writes one command line to the child's stdin.
    ///
    /// # Panics
    /// When the child's stdin is closed.
    pub async fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("holder {}: writing {command:?}: {e}", self.pid));
        stdin.flush().await.expect("flush stdin");
    }

    /// Freezes the child (SIGSTOP) and returns once the kernel reports it stopped.
    ///
    /// # Panics
    /// When the child does not show as stopped within 5 s.
    pub fn stop(&self) {
        kill(self.nix_pid(), Signal::SIGSTOP).expect("SIGSTOP");
        let deadline = std::time::Instant::now() + STOP_BOUND;
        while !is_stopped(self.pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "holder {} did not stop",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Asks the child to stop (SIGTERM), as a service manager does.
    pub fn terminate(&self) {
        kill(self.nix_pid(), Signal::SIGTERM).expect("SIGTERM");
    }

    /// Lets a frozen child run again (SIGCONT).
    pub fn cont(&self) {
        kill(self.nix_pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// Crashes the child (SIGKILL) and reaps it.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("SIGKILL the holder");
    }

    /// Closes the child's stdin (it then finishes and exits), waits up to `bound` for it to
    /// exit and returns its status and every line it printed that was not consumed yet.
    ///
    /// # Panics
    /// When it does not exit in time.
    pub async fn finish(mut self, bound: Duration) -> (ExitStatus, Vec<String>) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(bound, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("holder {} did not exit within {bound:?}", self.pid))
            .expect("wait for the holder");
        (status, self.rest(bound).await)
    }

    /// Reaps a child that was killed or has exited and returns the lines not consumed yet.
    pub async fn into_lines(mut self, bound: Duration) -> Vec<String> {
        let _ = self.child.kill().await;
        self.rest(bound).await
    }

    /// The remaining lines, up to the end of the child's stdout.
    async fn rest(&mut self, bound: Duration) -> Vec<String> {
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(bound, async {
            while let Some(line) = self.lines.recv().await {
                rest.push(line);
            }
        })
        .await;
        rest
    }
}

/// True when `/proc` shows the process as stopped (state `T`).
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            == Some('T')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_key_value_words() {
        let f = fields("RESUMED held=0 write=rejected extra");
        assert_eq!(f.get("held"), Some(&"0"));
        assert_eq!(f.get("write"), Some(&"rejected"));
        assert_eq!(f.len(), 2);
    }

    #[tokio::test]
    async fn stop_cont_and_kill_a_child() {
        let mut child = HolderProcess::spawn("sh", &["-c".into(), "echo READY; cat".into()]);
        child.expect("READY", Duration::from_secs(10)).await;
        child.stop();
        assert!(is_stopped(child.pid()));
        child.cont();
        child.send("hello").await;
        assert_eq!(
            child.expect("hello", Duration::from_secs(10)).await,
            "hello"
        );
        let (status, rest) = child.finish(Duration::from_secs(10)).await;
        assert!(status.success() && rest.is_empty(), "{status} {rest:?}");
    }
}
