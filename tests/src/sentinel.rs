//! [`RedisSentinels`]: a master, a replica and three Redis Sentinels watching them, all
//! private processes on free loopback ports.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{free_ports, server_bin, TempDir};
use crate::server::RedisServer;

/// The service name the Sentinels monitor.
pub const SERVICE: &str = "mymaster";
/// Upper bound for the set to come up or fail over.
const SETTLE: Duration = Duration::from_secs(30);

/// A Sentinel-managed master/replica pair. Dropping it stops every process.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The initial master and replica (indices 0 and 1).
    pub servers: Vec<RedisServer>,
    sentinels: Vec<(u16, Child)>,
    _dir: TempDir,
}

impl RedisSentinels {
    /// Starts the pair and three Sentinels (quorum 2, down-after 1 s), and waits until the
    /// replica is in sync and every Sentinel knows it.
    pub fn start() -> Self {
        Self::start_with_master_args(&[])
    }

    /// As [`start`](Self::start), with a master the Sentinels can never demote (its
    /// `REPLICAOF` and `SLAVEOF` are renamed away): after a failover it keeps accepting
    /// writes, as an old master cut off from the Sentinels does.
    pub fn start_with_undemotable_master() -> Self {
        Self::start_with_master_args(&[
            "--rename-command",
            "REPLICAOF",
            "distlock_test_replicaof",
            "--rename-command",
            "SLAVEOF",
            "distlock_test_slaveof",
        ])
    }

    fn start_with_master_args(extra: &[&str]) -> Self {
        // No diskless-sync delay: the replica is in sync in milliseconds, not 5 s.
        let master = RedisServer::builder()
            .args(["--repl-diskless-sync-delay", "0"])
            .args(extra.iter().copied())
            .start();
        let replica = RedisServer::builder()
            .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
            .start();
        let dir = TempDir::new("distlock-sentinel").expect("temp dir");
        let ports = free_ports(3).expect("free ports");
        let sentinels = ports
            .iter()
            .map(|&port| (port, spawn_sentinel(&dir, port, master.port())))
            .collect();
        let set = Self {
            servers: vec![master, replica],
            sentinels,
            _dir: dir,
        };
        set.wait_until("the sentinels see the replica", |s| {
            s.sentinels_see_replica()
        });
        set
    }

    /// `redis://127.0.0.1:<port>` of each Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|(port, _)| format!("redis://127.0.0.1:{port}"))
            .collect()
    }

    /// The port the Sentinels currently name as master.
    pub fn master_port(&self) -> Option<u16> {
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(SERVICE)
            .query(&mut self.sentinel_conn()?)
            .ok()?;
        addr.get(1)?.parse().ok()
    }

    /// Asks a Sentinel to fail over now (again while it answers "not now"), and waits until
    /// the master changed.
    pub fn failover(&self) {
        let before = self.master_port();
        self.wait_until("the master changed", |s| {
            if s.master_port().is_some_and(|p| Some(p) != before) {
                return true;
            }
            if let Some(mut conn) = s.sentinel_conn() {
                let _: redis::RedisResult<()> = redis::cmd("SENTINEL")
                    .arg("failover")
                    .arg(SERVICE)
                    .query(&mut conn);
            }
            false
        });
    }

    fn sentinels_see_replica(&self) -> bool {
        self.sentinels.iter().all(|(port, _)| {
            let Ok(mut conn) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            else {
                return false;
            };
            let replicas: redis::RedisResult<Vec<redis::Value>> = redis::cmd("SENTINEL")
                .arg("replicas")
                .arg(SERVICE)
                .query(&mut conn);
            replicas.is_ok_and(|r| !r.is_empty())
        })
    }

    fn sentinel_conn(&self) -> Option<redis::Connection> {
        let url = self.sentinel_urls().into_iter().next()?;
        redis::Client::open(url)
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(2))
            .ok()
    }

    fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + SETTLE;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "sentinels: timed out waiting until {what}"
            );
            // Sentinel state changes have no event a test can wait on.
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for (_, child) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn_sentinel(dir: &TempDir, port: u16, master: u16) -> Child {
    let conf = dir.path().join(format!("sentinel-{port}.conf"));
    let text = format!(
        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
         sentinel monitor {SERVICE} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 5000\n",
        dir = dir.path().display()
    );
    std::fs::write(&conf, text).expect("write sentinel.conf");
    let child = Command::new(server_bin())
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server --sentinel");
    let deadline = Instant::now() + SETTLE;
    let url = format!("redis://127.0.0.1:{port}");
    while redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "sentinel on {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}
