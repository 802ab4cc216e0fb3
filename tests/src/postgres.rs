//! [`PostgresServer`]: a private Postgres on a free loopback port, in its own temporary
//! directory (`initdb`, then `postgres`), stopped by pid on drop. Never the machine's
//! Postgres on 5432.
//!
//! The binaries are `$PG_BIN_DIR/{initdb,postgres}`, else the newest Debian
//! `/usr/lib/postgresql/<version>/bin`, else `initdb` and `postgres` on `PATH`. Postgres
//! refuses to run as root: as root, both run as the `postgres` user (the Debian package's),
//! else `nobody`, and own the directory.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, Uid, User};

use crate::server::{free_port, TempDir};

/// Generous for `initdb` and a first start on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// New ports tried when the picked one was taken meanwhile.
const PORT_ATTEMPTS: usize = 5;
/// How long an immediate shutdown may take before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// What Postgres logs once it accepts connections.
const READY_LINE: &str = "database system is ready to accept connections";
/// How to get the binaries, for the panic message when they are missing.
const INSTALL_HINT: &str = "install Postgres (`sudo apt-get install postgresql` on \
     Debian/Ubuntu; tests/run.sh does) or set PG_BIN_DIR to the directory of initdb";

/// A private Postgres: superuser `postgres`, trust authentication on 127.0.0.1 only,
/// without durability (fsync off). Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct PostgresServer {
    child: Child,
    port: u16,
    // Dropped after `child` is stopped (Drop below), removing the data.
    dir: TempDir,
}

impl PostgresServer {
    /// Runs `initdb`, starts `postgres` on a free loopback port and waits until it accepts
    /// connections.
    ///
    /// # Panics
    /// When the binaries are missing (the message says how to install them), or the server
    /// does not come up within a minute (the message has its log).
    pub fn start() -> PostgresServer {
        let bin = bin_dir();
        let mut dir = TempDir::new("distlock-postgres").expect("a temp dir for Postgres");
        let user = unprivileged_user();
        if let Some(user) = &user {
            std::os::unix::fs::chown(dir.path(), Some(user.uid.as_raw()), Some(user.gid.as_raw()))
                .expect("giving the Postgres dir to its user");
        }
        let data = dir.path().join("data");
        let mut initdb = command(&bin.join("initdb"), user.as_ref());
        initdb.arg("-D").arg(&data);
        initdb.args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        let out = initdb
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL_HINT}", bin.display()));
        assert!(
            out.status.success(),
            "initdb failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut last = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            let child = spawn_postgres(&bin, &data, dir.path(), port, user.as_ref());
            let mut server = PostgresServer { child, port, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(log) if log.contains("could not bind") || log.contains("in use") => {
                    last = log;
                    dir = server.into_dir();
                }
                Err(log) => panic!("postgres did not start on port {port}:\n{log}"),
            }
        }
        panic!("postgres: port taken on all {PORT_ATTEMPTS} attempts; last log:\n{last}")
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connection string of the superuser's `postgres` database, over TCP.
    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// A connected client; its connection runs on a spawned task.
    ///
    /// # Panics
    /// If connecting fails.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connecting to the private postgres: {e}"));
        tokio::spawn(connection);
        client
    }

    /// Polls a TCP connection until the server answers, it exits, or the start bound ends.
    /// `Err` carries its log.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited ({status}):\n{}", self.log()));
            }
            // Our own child's log says it is ready (not whoever might answer on the port);
            // a file has no event to wait on, so we poll it.
            if self.log().contains(READY_LINE)
                && TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "not ready within {START_TIMEOUT:?}:\n{}",
            self.log()
        ))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Stops the process and hands back the directory (for a retry on another port).
    fn into_dir(mut self) -> TempDir {
        self.stop();
        let dir = TempDir::new("distlock-postgres-unused").expect("a temp dir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// SIGQUIT (an immediate shutdown: the data is thrown away anyway), SIGKILL after a
    /// grace period; then reap. Postgres' own children exit with it.
    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Not reaped yet, so the pid is still ours.
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGQUIT);
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_postgres(
    bin: &Path,
    data: &Path,
    socket_dir: &Path,
    port: u16,
    user: Option<&User>,
) -> Child {
    let log = std::fs::File::create(socket_dir.join("postgres.log")).expect("postgres.log");
    if let Some(user) = user {
        std::os::unix::fs::chown(
            socket_dir.join("postgres.log"),
            Some(user.uid.as_raw()),
            None,
        )
        .expect("giving postgres.log to its user");
    }
    let mut cmd = command(&bin.join("postgres"), user);
    cmd.arg("-D").arg(data).arg("-p").arg(port.to_string());
    // The socket in our own dir (not /var/run/postgresql), TCP on loopback only.
    cmd.arg("-k").arg(socket_dir);
    cmd.args(["-c", "listen_addresses=127.0.0.1"]);
    // A throwaway database: no durability, so trials do not wait on the disk.
    for setting in [
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
    ] {
        cmd.args(["-c", setting]);
    }
    cmd.stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run postgres in {}: {e}; {INSTALL_HINT}",
                bin.display()
            )
        })
}

/// `program`, run as `user` when given (the process is exec'd with its ids: no wrapper
/// process between us and the pid we stop).
fn command(program: &Path, user: Option<&User>) -> Command {
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::null());
    if let Some(user) = user {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        // Postgres reads its own user's HOME-less environment; keep it from root's.
        cmd.env("HOME", &user.dir);
    }
    cmd
}

/// As root, the user Postgres runs as: `postgres` where the package created it, else
/// `nobody`. `None` when we are not root.
fn unprivileged_user() -> Option<User> {
    if !Uid::effective().is_root() {
        return None;
    }
    let user = ["postgres", "nobody"]
        .into_iter()
        .find_map(|name| User::from_name(name).ok().flatten());
    Some(user.expect("running as root, with neither a `postgres` nor a `nobody` user"))
}

/// Where `initdb` and `postgres` are (see the module docs).
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = newest_debian_bin_dir(Path::new("/usr/lib/postgresql")) {
        return dir;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
        .unwrap_or_else(|| panic!("no initdb and postgres found; {INSTALL_HINT}"))
}

/// `<root>/<version>/bin` with the highest numeric version that has `initdb`.
fn newest_debian_bin_dir(root: &Path) -> Option<PathBuf> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_private_postgres_answers_and_is_gone_after_drop() {
        let server = tokio::task::block_in_place(PostgresServer::start);
        let port = server.port();
        assert_ne!(port, 5432);
        let db = server.connect().await;
        let one: i32 = db.query_one("SELECT 1", &[]).await.unwrap().get(0);
        assert_eq!(one, 1);
        let dir = server.dir.path().to_owned();
        drop(db);
        tokio::task::block_in_place(|| drop(server));
        assert!(!dir.exists(), "the data dir is removed");
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
