//! [`RedisSentinels`]: a master, a replica and three Redis Sentinels watching them, all
//! private processes on free loopback ports.

use std::time::{Duration, Instant};

use crate::blocking::off_the_runtime;
use crate::error::StartError;
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
    /// replica is in sync and every Sentinel knows it, blocking the thread meanwhile: in an
    /// async test, prefer [`Self::try_start`].
    ///
    /// # Panics
    /// As [`Self::try_start`] fails.
    pub fn start() -> Self {
        Self::start_blocking(&[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Self::start`], without blocking the runtime (the start runs on Tokio's
    /// blocking pool), reporting a failure instead of panicking.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_testkit::{sentinel::SERVICE, RedisSentinels};
    ///
    /// let sentinels = RedisSentinels::try_start().await?;
    /// // What a Sentinel client takes (lock-core's `LockClient::sentinel`, say).
    /// let (urls, service): (Vec<String>, &str) = (sentinels.sentinel_urls(), SERVICE);
    /// # drop((urls, service)); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A server's [`StartError`]; [`StartError::Failed`] when the Sentinels do not see the
    /// replica within 30 s.
    pub async fn try_start() -> Result<Self, StartError> {
        off_the_runtime(|| Self::start_blocking(&[])).await
    }

    /// As [`start`](Self::start), with a master the Sentinels can never demote (its
    /// `REPLICAOF` and `SLAVEOF` are renamed away): after a failover it keeps accepting
    /// writes, as an old master cut off from the Sentinels does.
    pub fn start_with_undemotable_master() -> Self {
        let start = Self::start_blocking(&[
            "--rename-command",
            "REPLICAOF",
            "distlock_test_replicaof",
            "--rename-command",
            "SLAVEOF",
            "distlock_test_slaveof",
        ]);
        start.unwrap_or_else(|e| panic!("{e}"))
    }

    fn start_blocking(extra: &[&str]) -> Result<Self, StartError> {
        // No diskless-sync delay: the replica is in sync in milliseconds, not 5 s.
        let master = RedisServer::builder()
            .args(["--repl-diskless-sync-delay", "0"])
            .args(extra.iter().copied())
            .try_start_blocking()?;
        let replica = RedisServer::builder()
            .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
            .try_start_blocking()?;
        let sentinels = (0..3)
            .map(|_| start_sentinel(master.port()))
            .collect::<Result<_, _>>()?;
        let set = Self {
            servers: vec![master, replica],
            sentinels,
        };
        let seen = set.settle("the sentinels see the replica", |s| {
            s.sentinels_see_replica()
        });
        seen.map_err(StartError::Failed)?;
        Ok(set)
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
        let changed = self.settle("the master changed", |s| {
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
        changed.unwrap_or_else(|e| panic!("{e}"));
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

    /// Polls `done` until it holds; an error naming `what` after [`SETTLE`].
    fn settle(&self, what: &str, done: impl Fn(&Self) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + SETTLE;
        while !done(self) {
            if Instant::now() >= deadline {
                return Err(format!("sentinels: timed out waiting until {what}"));
            }
            // Sentinel state changes have no event a test can wait on.
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

/// A Sentinel watching the master on `master`; its configuration file (which it rewrites)
/// lives in its private directory.
fn start_sentinel(master: u16) -> Result<RedisServer, StartError> {
    let config = format!(
        "sentinel monitor {SERVICE} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 5000\n"
    );
    RedisServer::builder()
        .config(config)
        .arg("--sentinel")
        .try_start_blocking()
}
