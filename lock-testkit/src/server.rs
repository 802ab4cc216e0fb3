//! [`RedisServer`]: a private `redis-server` process on a free loopback port,
//! with fault controls (stop, kill, restart, pause, resume).
//!
//! Every test gets its own server, so tests never share data, never touch a
//! system Redis on 6379 and can freely inject faults.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use rustix::process::Signal;

use crate::builder::RedisServerBuilder;
use crate::error::StartError;
use crate::ports::free_ports;
use crate::process::{server_bin, Proc, SpawnError};
use crate::temp_dir::TempDir;

/// Upper bound for a server to start answering; generous for a loaded CI box.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `stop()` lets SIGTERM work before falling back to SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// New ports tried by `start()` when the picked port got taken meanwhile.
const PORT_ATTEMPTS: usize = 5;
/// `restart()` must keep its port, so it waits for it instead (20 × 100 ms).
const RESTART_ATTEMPTS: usize = 20;
/// Timeouts of the connection returned by [`RedisServer::conn`].
const CONN_TIMEOUT: Duration = Duration::from_secs(10);

/// True if the server binary (see [`RedisServer`]) can be run.
/// Use it to skip tests with a clear message instead of failing.
pub fn redis_server_available() -> bool {
    Command::new(server_bin())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `$REDIS_URL` if set and non-empty.
///
/// Tests that only need *a* Redis and no fault control may use it; everything
/// else (and the default for all tests) is a private [`RedisServer`].
pub fn redis_url_for_tests() -> Option<String> {
    std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
}

/// A private `redis-server` on `127.0.0.1:<free port>` without persistence,
/// running in its own temp dir.
///
/// Dropping it (also while unwinding from a panic) kills the process and
/// removes the dir. Keep it in a local, not a `static`: statics are never
/// dropped, so their process would outlive the test binary.
///
/// The control methods block the calling thread briefly (a few ms; bounded
/// by 10 s), which is fine inside `#[tokio::test]`.
pub struct RedisServer {
    /// The binary, fixed at the first start so a restart runs the same one.
    pub(crate) bin: String,
    pub(crate) port: u16,
    /// The port was given ([`RedisServerBuilder::port`]): never replaced by another.
    pub(crate) fixed_port: bool,
    pub(crate) bus_port: Option<u16>,
    /// `redis.conf` in `dir` is the first argument.
    pub(crate) config: bool,
    pub(crate) extra: Vec<String>,
    pub(crate) dir: TempDir,
    pub(crate) proc: Option<Proc>,
}

impl RedisServer {
    /// Starts a server with default settings; see [`RedisServerBuilder::start`].
    pub fn start() -> RedisServer {
        RedisServer::builder().start()
    }

    /// Starts a server with default settings without blocking the runtime, reporting a
    /// failure instead of panicking; see [`RedisServerBuilder::try_start`].
    ///
    /// # Errors
    /// As [`RedisServerBuilder::try_start`].
    pub async fn try_start() -> Result<RedisServer, StartError> {
        RedisServer::builder().try_start().await
    }

    /// A builder for extra arguments.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The TCP port; it stays the same across [`Self::restart`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The private working directory (holds `nodes.conf` for cluster nodes and the
    /// [configuration file](RedisServerBuilder::config)).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, or `None` after [`Self::stop`] / [`Self::kill`].
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(Proc::pid)
    }

    /// False after [`Self::stop`] / [`Self::kill`] until [`Self::restart`].
    pub fn is_running(&self) -> bool {
        self.proc.is_some()
    }

    /// The last lines the server logged (for assertion messages).
    pub fn log(&self) -> String {
        self.proc.as_ref().map(Proc::log_text).unwrap_or_default()
    }

    /// A client for [`Self::url`]; connecting is up to the caller.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a redis:// URL with a loopback address is valid")
    }

    /// A connected multiplexed connection with generous 10 s connect and
    /// response timeouts (the redis crate's 500 ms default flakes on a loaded
    /// machine). Build your own from [`Self::client`] to test timeouts.
    ///
    /// # Panics
    /// If connecting fails, e.g. while the server is stopped or paused.
    pub async fn conn(&self) -> MultiplexedConnection {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONN_TIMEOUT))
            .set_response_timeout(Some(CONN_TIMEOUT));
        self.client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.url()))
    }

    /// Runs one command on a new blocking connection (10 s timeouts) and returns its
    /// reply: for setup outside async code, e.g. `server.command::<()>(redis::cmd("ACL")…)`.
    ///
    /// # Panics
    /// If connecting or the command fails.
    pub fn command<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut conn = self
            .client()
            .get_connection_with_timeout(CONN_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.url()));
        conn.set_read_timeout(Some(CONN_TIMEOUT))
            .and_then(|()| cmd.query(&mut conn))
            .unwrap_or_else(|e| panic!("{cmd:?} on {}: {e}", self.url()))
    }

    /// Graceful shutdown: SIGTERM, SIGKILL after 10 s, then reap. No-op if
    /// not running. Data is gone (no persistence).
    pub fn stop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.terminate(STOP_GRACE);
        }
    }

    /// Crash: SIGKILL and reap. No-op if not running.
    pub fn kill(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            let _ = proc.kill();
        }
    }

    /// Kills the server if running, then starts a new process on the same
    /// port with empty data, and waits until it answers PING.
    ///
    /// # Panics
    /// If the port stays taken by another process for ~2 s or startup fails.
    pub fn restart(&mut self) {
        self.kill();
        self.launch(false).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Freezes the process (SIGSTOP): connections stay open but nothing is
    /// answered, like a GC pause or a hung host. Returns once it is stopped.
    ///
    /// # Panics
    /// If the server is not running.
    pub fn pause(&self) {
        let proc = self.running("pause");
        proc.signal(Signal::STOP);
        proc.wait_stopped(START_TIMEOUT);
    }

    /// Unfreezes the process (SIGCONT); queued commands are then served.
    ///
    /// # Panics
    /// If the server is not running.
    pub fn resume(&self) {
        self.running("resume").signal(Signal::CONT);
    }

    fn running(&self, what: &str) -> &Proc {
        self.proc
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: redis-server on port {} is not running", self.port))
    }

    /// Spawns the process, retrying while the port is taken: on fresh ports for a first
    /// start, or on the same port after a short wait for a restart or a given port.
    pub(crate) fn launch(&mut self, first: bool) -> Result<(), StartError> {
        let fresh_ports = first && !self.fixed_port;
        let attempts = if fresh_ports {
            PORT_ATTEMPTS
        } else {
            RESTART_ATTEMPTS
        };
        let mut last_error = String::new();
        for attempt in 0..attempts {
            if fresh_ports {
                let ports = pick_ports(2)?;
                self.port = ports[0];
                self.bus_port = self.bus_port.map(|_| ports[1]);
            } else if first && attempt == 0 && self.bus_port.is_some() {
                // A given port: only the bus port is ours to pick (once: it must not move).
                let ports = pick_ports(2)?;
                self.bus_port = ports.into_iter().find(|&p| p != self.port);
            }
            match Proc::spawn(&self.bin, &self.command_line(), self.port, START_TIMEOUT) {
                Ok(proc) => {
                    self.proc = Some(proc);
                    return Ok(());
                }
                Err(SpawnError::AddrInUse(msg)) => last_error = msg,
                Err(SpawnError::CannotRun(source)) => {
                    return Err(StartError::spawn(self.bin.clone(), source));
                }
                Err(SpawnError::Fatal(msg)) => return Err(StartError::Failed(msg)),
            }
            if !fresh_ports {
                // Someone else holds our port; no event tells us when it's freed.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Err(StartError::Failed(format!(
            "redis-server: port taken on all {attempts} attempts; last error: {last_error}"
        )))
    }

    fn command_line(&self) -> Vec<String> {
        let dir = self.dir.path().display().to_string();
        // A configuration file must come first; every argument after it overrides it.
        let config =
            (self.config).then(|| self.dir.path().join("redis.conf").display().to_string());
        let mut args: Vec<String> = config.into_iter().collect();
        args.extend(["--save", "", "--appendonly", "no", "--loglevel", "notice"].map(String::from));
        args.extend(self.extra.iter().cloned());
        if let Some(bus_port) = self.bus_port {
            let conf = self.dir.path().join("nodes.conf").display().to_string();
            args.extend([
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                conf,
            ]);
            args.extend(["--cluster-port".into(), bus_port.to_string()]);
        }
        // Last, so extras can't move the server off loopback or out of its dir.
        let port = self.port.to_string();
        args.extend(
            [
                "--port",
                &port,
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir,
                "--daemonize",
                "no",
            ]
            .map(String::from),
        );
        args
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Runs on unwind too. The dir is removed after this, by TempDir's Drop.
        self.kill();
    }
}

impl fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .field("dir", &self.dir.path())
            .finish()
    }
}

fn pick_ports(n: usize) -> Result<Vec<u16>, StartError> {
    free_ports(n).map_err(|e| StartError::Failed(format!("picking free ports: {e}")))
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
