//! [`RedisSentinels`]: a master, a replica and three Redis Sentinels watching them, all
//! private processes on free loopback ports.

use std::time::{Duration, Instant};

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
    sentinels: Vec<RedisServer>,
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
        let sentinels = (0..3).map(|_| start_sentinel(master.port())).collect();
        let set = Self {
            servers: vec![master, replica],
            sentinels,
        };
        set.wait_until("the sentinels see the replica", |s| {
            s.sentinels_see_replica()
        });
        set
    }

    /// `redis://127.0.0.1:<port>` of each Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
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
        self.sentinels.iter().all(|sentinel| {
            let Ok(mut conn) =
                (sentinel.client()).get_connection_with_timeout(Duration::from_secs(1))
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

/// A Sentinel watching the master on `master`; its configuration file (which it rewrites)
/// lives in its private directory.
fn start_sentinel(master: u16) -> RedisServer {
    let config = format!(
        "sentinel monitor {SERVICE} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 5000\n"
    );
    RedisServer::builder()
        .config(config)
        .arg("--sentinel")
        .start()
}
