//! The bench's own Redis: a private loopback `redis-server` (or `REDIS_URL`), and the
//! admin calls around each scenario (`FLUSHALL`, `CONFIG RESETSTAT`, `INFO commandstats`).

use std::collections::BTreeMap;

use distlock_examples::ExampleRedis;
use redis::aio::MultiplexedConnection;

/// The bench's Redis: `REDIS_URL` (loopback only) or a private server, stopped when dropped.
#[derive(Debug)]
pub struct Server {
    pub url: String,
    private: Option<ExampleRedis>,
}

impl Server {
    /// `REDIS_URL` when set (must be loopback), else a fresh private server on a free port.
    pub fn start() -> Result<Self, String> {
        if let Ok(url) = std::env::var("REDIS_URL") {
            if !(url.contains("127.0.0.1") || url.contains("localhost") || url.contains("[::1]")) {
                return Err(format!(
                    "REDIS_URL {} is not loopback; the bench refuses it",
                    distlock_examples::redacted(&url)
                ));
            }
            distlock_examples::check_reachable(&url).map_err(|e| e.to_string())?;
            return Ok(Self { url, private: None });
        }
        let private =
            ExampleRedis::start_private(&["--maxclients", "20000"]).map_err(|e| e.to_string())?;
        Ok(Self {
            url: private.url().to_owned(),
            private: Some(private),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.private.as_ref().and_then(ExampleRedis::pid)
    }
}

/// Admin connection to the bench's Redis.
#[derive(Clone)]
pub struct Admin {
    conn: MultiplexedConnection,
}

/// Commands the client itself sends (not run inside a Lua script or function). `set` is
/// added for the libraries that send `SET NX PX` themselves.
const SENT: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "script",
    "function",
    "subscribe",
    "unsubscribe",
    "ping",
    "client",
    "hello",
    "select",
];

/// The commands that run Lua: distlock's calls of its library's functions (`FCALL`,
/// `FCALL_RO`) and the peers' scripts (`EVALSHA`, `EVAL`: Redisson's, the hand-written
/// baseline's, rslock's). Each library uses one kind, so their sum counts either.
const LUA: &[&str] = &[
    "fcall",
    "fcall_ro",
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
];

/// Calls per command since the last reset (the bench's own `info`/`config` left out).
#[derive(Debug, Default, Clone)]
pub struct CmdStats(pub BTreeMap<String, (u64, u64)>);

impl CmdStats {
    /// Every command, including those run inside Lua scripts.
    pub fn total(&self) -> u64 {
        self.0.values().map(|(calls, _)| calls).sum()
    }

    /// Redis time spent in the commands the client sent (µs; a script's time includes its
    /// inner calls).
    pub fn usec(&self, set_is_sent: bool) -> u64 {
        self.sent_iter(set_is_sent).map(|(_, usec)| usec).sum()
    }

    /// Commands sent by the client (one each on the wire); `set_is_sent` for libraries
    /// that send `SET` themselves rather than from a script.
    pub fn sent(&self, set_is_sent: bool) -> u64 {
        self.sent_iter(set_is_sent).map(|(calls, _)| calls).sum()
    }

    fn sent_iter(&self, set_is_sent: bool) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0
            .iter()
            .filter(move |(name, _)| {
                let base = name.split('|').next().unwrap_or(name);
                SENT.contains(&base) || (set_is_sent && base == "set")
            })
            .map(|(_, v)| *v)
    }

    /// `(calls, µs)` of the commands that ran Lua (see `LUA`).
    pub fn lua(&self) -> (u64, u64) {
        LUA.iter()
            .filter_map(|name| self.0.get(*name))
            .fold((0, 0), |(c, u), (calls, usec)| (c + calls, u + usec))
    }
}

impl Admin {
    pub async fn connect(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self { conn })
    }

    async fn cmd<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> T {
        let mut conn = self.conn.clone();
        cmd.query_async(&mut conn).await.expect("admin command")
    }

    /// Empties the data set and resets the counters: every run starts from the same state.
    pub async fn reset(&self) {
        let () = self.cmd(redis::cmd("FLUSHALL").arg("SYNC")).await;
        self.reset_stats().await;
    }

    pub async fn reset_stats(&self) {
        let () = self.cmd(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    }

    pub async fn ping(&self) {
        let _: String = self.cmd(&mut redis::cmd("PING")).await;
    }

    pub async fn dbsize(&self) -> u64 {
        self.cmd(&mut redis::cmd("DBSIZE")).await
    }

    pub async fn info(&self, section: &str) -> String {
        self.cmd(redis::cmd("INFO").arg(section)).await
    }

    pub async fn commandstats(&self) -> CmdStats {
        let text = self.info("commandstats").await;
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("cmdstat_") else {
                continue;
            };
            let Some((name, fields)) = rest.split_once(':') else {
                continue;
            };
            if name == "info" || name.starts_with("config") || name == "dbsize" {
                continue;
            }
            let field = |key: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0)
            };
            out.insert(name.to_owned(), (field("calls="), field("usec=")));
        }
        CmdStats(out)
    }

    pub async fn version(&self) -> String {
        let text = self.info("server").await;
        text.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_owned()
    }
}
