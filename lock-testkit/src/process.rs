//! Low-level plumbing for [`crate::RedisServer`]: spawning `redis-server`, capturing its
//! log, readiness, signals. Internal to the crate.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

/// How many log lines we keep for error messages.
const LOG_LINES: usize = 200;
/// Redis prints this (at `notice` level) once its listening sockets are up.
const READY_LINE: &str = "Ready to accept connections";
/// A Sentinel prints no such line; this one comes once it listens and runs.
const SENTINEL_READY_LINE: &str = "Sentinel ID is";
/// Redis prints this when the port (or cluster bus port) is taken.
const IN_USE_LINE: &str = "Address already in use";

/// The binaries looked for on `PATH`, in order, when `$REDIS_SERVER_BIN` is unset.
const SERVER_BINS: [&str; 2] = ["redis-server", "valkey-server"];

/// The server binary: `$REDIS_SERVER_BIN` when set and not empty, else the first of
/// `redis-server` and `valkey-server` on `PATH`, else `redis-server` (whose spawn then fails
/// with "not found", which the caller turns into the install hint).
pub(crate) fn server_bin() -> String {
    if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN").filter(|b| !b.is_empty()) {
        return bin.to_string_lossy().into_owned();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = |name: &str| std::env::split_paths(&path).any(|dir| dir.join(name).is_file());
    SERVER_BINS
        .into_iter()
        .find(|name| on_path(name))
        .unwrap_or(SERVER_BINS[0])
        .to_owned()
}

/// Why a spawn attempt failed.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The binary could not be run at all.
    CannotRun(io::Error),
    /// The port (or bus port) was taken: retrying on another port may help.
    AddrInUse(String),
    /// Anything else; the message includes the server log.
    Fatal(String),
}

/// Log lines of one process, filled by a reader thread; waiters use the condvar.
#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    changed: Condvar,
}

#[derive(Default)]
struct LogState {
    lines: VecDeque<String>,
    ready: bool,
    /// Every copy of the pipe's write end is closed: the process has exited.
    closed: bool,
}

impl Log {
    fn lock(&self) -> MutexGuard<'_, LogState> {
        // A panicking reader thread can't leave the state inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, line: String) {
        let mut st = self.lock();
        st.ready |= line.contains(READY_LINE) || line.contains(SENTINEL_READY_LINE);
        if st.lines.len() == LOG_LINES {
            st.lines.pop_front();
        }
        st.lines.push_back(line);
        self.changed.notify_all();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Blocks until `done` holds or `deadline` passes; returns the final state.
    fn wait(
        &self,
        deadline: Instant,
        done: impl Fn(&LogState) -> bool,
    ) -> MutexGuard<'_, LogState> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let guard = self.lock();
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, timeout, |st| !done(st))
            .unwrap_or_else(|e| e.into_inner());
        guard
    }

    fn text(&self) -> String {
        Vec::from(self.lock().lines.clone()).join("\n")
    }
}

/// One running `redis-server` process with its captured stdout+stderr.
pub(crate) struct Proc {
    child: Child,
    log: Arc<Log>,
}

impl Proc {
    /// Spawns `bin args...` and waits (up to `timeout`) until it is ready and
    /// answers PING on `port`.
    pub(crate) fn spawn(
        bin: &str,
        args: &[String],
        port: u16,
        timeout: Duration,
    ) -> Result<Proc, SpawnError> {
        let log = Arc::new(Log::default());
        let child = spawn_logged(bin, args, &log).map_err(SpawnError::CannotRun)?;
        let mut proc = Proc { child, log };
        match proc.wait_ready(port, Instant::now() + timeout) {
            Ok(()) => Ok(proc),
            Err(e) => {
                let _ = proc.kill();
                Err(e)
            }
        }
    }

    fn wait_ready(&mut self, port: u16, deadline: Instant) -> Result<(), SpawnError> {
        // Waiting on our own child's "ready" line (not just any PING reply)
        // guarantees we talk to our process, not to whoever stole the port.
        let (ready, closed) = {
            let st = self.log.wait(deadline, |st| st.ready || st.closed);
            (st.ready, st.closed)
        };
        if closed || !ready {
            let log = self.log.text();
            let what = if closed {
                "exited during startup"
            } else {
                "did not become ready in time"
            };
            let msg = format!(
                "redis-server (pid {}) on port {port} {what}; log:\n{log}",
                self.pid()
            );
            return Err(if log.contains(IN_USE_LINE) {
                SpawnError::AddrInUse(msg)
            } else {
                SpawnError::Fatal(msg)
            });
        }
        ping_until(port, deadline).map_err(|e| {
            SpawnError::Fatal(format!(
                "redis-server on port {port} logged ready but PING failed: {e}"
            ))
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log_text(&self) -> String {
        self.log.text()
    }

    /// Sends `sig` to the process.
    pub(crate) fn signal(&self, sig: Signal) {
        // The child is not reaped until we wait() on it, so the pid can't be reused.
        let pid = Pid::from_child(&self.child);
        if let Err(e) = kill_process(pid, sig) {
            panic!("sending {sig:?} to redis-server pid {pid:?}: {e}");
        }
    }

    /// SIGKILL and reap. Returns once the process is gone.
    pub(crate) fn kill(&mut self) -> io::Result<()> {
        // SIGKILL also ends a SIGSTOPped process.
        let _ = self.child.kill();
        self.child.wait().map(|_| ())
    }

    /// SIGTERM (graceful), falling back to SIGKILL after `grace`; then reap.
    pub(crate) fn terminate(&mut self, grace: Duration) {
        self.signal(Signal::TERM);
        // A paused server would never handle SIGTERM.
        self.signal(Signal::CONT);
        let exited = self.log.wait(Instant::now() + grace, |st| st.closed).closed;
        if !exited {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Blocks until the kernel reports the process as stopped (after SIGSTOP),
    /// so a command sent right after `pause()` can't still be served.
    pub(crate) fn wait_stopped(&self, timeout: Duration) {
        let stat = format!("/proc/{}/stat", self.child.id());
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match std::fs::read_to_string(&stat) {
                // Field 3 (after the parenthesised name) is the state; 'T' = stopped.
                Ok(s)
                    if s.rsplit(')')
                        .next()
                        .is_some_and(|rest| rest.trim_start().starts_with('T')) =>
                {
                    return
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => return, // no procfs: best effort
            }
        }
        panic!(
            "redis-server pid {} did not stop within {timeout:?} after SIGSTOP",
            self.child.id()
        );
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Never leak a process, whatever path dropped us (idempotent after kill()).
        let _ = self.kill();
    }
}

/// Spawns with stdout and stderr on one pipe drained by a thread into `log`.
fn spawn_logged(bin: &str, args: &[String], log: &Arc<Log>) -> io::Result<Child> {
    let (reader, writer) = io::pipe()?;
    let child = {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        cmd.spawn()?
        // `cmd` (holding our write ends) drops here, so EOF means "child exited".
    };
    let log = Arc::clone(log);
    std::thread::Builder::new()
        .name(format!("redis-log-{}", child.id()))
        .spawn(move || drain(reader, &log))?;
    Ok(child)
}

fn drain(reader: impl Read, log: &Log) {
    for line in BufReader::new(reader).lines() {
        match line {
            Ok(line) => log.push(line),
            Err(_) => break,
        }
    }
    log.close();
}

/// PINGs `port` until some RESP reply arrives. Any reply counts: with
/// `--requirepass` the answer is a NOAUTH error, which still proves liveness.
fn ping_until(port: u16, deadline: Instant) -> io::Result<()> {
    let mut last_err = io::Error::other("no attempt made");
    for _ in 0..50 {
        match ping_once(port) {
            Ok(()) => return Ok(()),
            Err(e) => last_err = e,
        }
        if Instant::now() >= deadline {
            break;
        }
        // Only reached in odd cases (ready was logged, so the socket listens).
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(last_err)
}

fn ping_once(port: u16) -> io::Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"PING\r\n")?;
    let mut first = [0u8; 1];
    stream.read_exact(&mut first)?;
    match first[0] {
        b'+' | b'-' => Ok(()),
        other => Err(io::Error::other(format!(
            "unexpected PING reply byte {other:#x}"
        ))),
    }
}
