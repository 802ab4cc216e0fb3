//! [`RedisServerBuilder`]: what to start, before starting it.

use crate::blocking::off_the_runtime;
use crate::error::StartError;
use crate::process::server_bin;
use crate::server::RedisServer;
use crate::temp_dir::TempDir;

/// Configures a [`RedisServer`] before starting it.
#[derive(Debug, Clone, Default)]
pub struct RedisServerBuilder {
    pub(crate) args: Vec<String>,
    pub(crate) config: Option<String>,
    pub(crate) port: Option<u16>,
    pub(crate) cluster: bool,
    pub(crate) bin: Option<String>,
}

impl RedisServerBuilder {
    /// Adds one extra command-line argument, e.g. `.arg("--maxmemory").arg("1mb")`.
    ///
    /// Extras go after the defaults (`--save "" --appendonly no --loglevel notice`)
    /// so they can override them, but before `--port/--bind/--dir`, which
    /// always win. Don't raise `--loglevel` to `warning`: readiness is detected
    /// from `notice`-level lines ("Ready to accept connections").
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds several extra command-line arguments (see [`Self::arg`]).
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// A configuration file with these contents: written to `redis.conf` in the server's
    /// private directory and passed as its first argument, so the server can rewrite it
    /// (a Sentinel must: `.config("sentinel monitor …").arg("--sentinel")`). Command-line
    /// arguments override it.
    pub fn config(mut self, contents: impl Into<String>) -> Self {
        self.config = Some(contents.into());
        self
    }

    /// Listens on this loopback port instead of a free one: for a server that must come
    /// up where a client already tries to connect. A port taken by another process is
    /// waited for (~2 s), not replaced.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Runs the server as a cluster node: `--cluster-enabled yes`, its
    /// `nodes.conf` in the private dir and a free cluster bus port.
    pub fn cluster_node(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Runs this binary (a `redis-server` or `valkey-server`) instead of the default:
    /// `$REDIS_SERVER_BIN` when set, else the first of `redis-server` and `valkey-server`
    /// on `PATH`.
    pub fn bin(mut self, bin: impl Into<String>) -> Self {
        self.bin = Some(bin.into());
        self
    }

    /// Starts the server and waits until it answers PING, blocking the thread meanwhile
    /// (a few milliseconds): for a test that is not async, or that starts one server.
    ///
    /// # Panics
    /// As [`Self::try_start`] fails: the binary is missing (the message says how to
    /// install it), or the server exits or stays silent for 10 s.
    pub fn start(self) -> RedisServer {
        self.try_start_blocking().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the server and waits until it answers PING, reporting a failure instead of
    /// panicking (for a suite that skips without a server, or a program that explains it
    /// to a user). The start runs on Tokio's blocking pool: the caller's runtime thread
    /// runs its other tasks meanwhile.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let server = match lock_testkit::RedisServer::builder().arg("--maxmemory").arg("64mb").try_start().await {
    ///     Ok(server) => server,
    ///     Err(e) if e.is_not_installed() => return eprintln!("skipped: {e}"),
    ///     Err(e) => panic!("{e}"),
    /// };
    /// # drop(server); }
    /// ```
    ///
    /// # Errors
    /// [`StartError::NotInstalled`] when there is no server binary (the message says how to
    /// install one), [`StartError::CannotRun`] when it cannot be run,
    /// [`StartError::Failed`] (with the server's log) when it did not come up in 10 s.
    pub async fn try_start(self) -> Result<RedisServer, StartError> {
        off_the_runtime(move || self.try_start_blocking()).await
    }

    /// As [`Self::try_start`], on the calling thread: for a program that starts its server
    /// before its runtime, or outside one.
    ///
    /// # Errors
    /// As [`Self::try_start`].
    pub fn try_start_blocking(self) -> Result<RedisServer, StartError> {
        let dir = TempDir::new("distlock-redis").map_err(|e| {
            StartError::Failed(format!("creating a temp dir for redis-server: {e}"))
        })?;
        if let Some(config) = &self.config {
            std::fs::write(dir.path().join("redis.conf"), config)
                .map_err(|e| StartError::Failed(format!("writing redis.conf: {e}")))?;
        }
        let mut server = RedisServer {
            bin: self.bin.unwrap_or_else(server_bin),
            port: self.port.unwrap_or(0),
            fixed_port: self.port.is_some(),
            // Placeholder: the first launch picks the real bus port.
            bus_port: self.cluster.then_some(0),
            config: self.config.is_some(),
            extra: self.args,
            dir,
            proc: None,
        };
        server.launch(true)?;
        Ok(server)
    }
}
