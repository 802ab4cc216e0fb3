//! The libraries behind one face: take a lock with the library's default waiting strategy,
//! release it. Plus a reference that is no library: Redisson 3.27's own lock and unlock Lua,
//! to show what the Redisson-compatible layout itself costs Redis (scenarios A and B only).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_examples::redisson_scripts;
use redis::aio::MultiplexedConnection;
use redis::Script;

/// Lease the peers without a watchdog ask for (distlock uses its default watchdog lease).
pub const LEASE: Duration = Duration::from_secs(30);
/// The baseline's poll interval when the lock is busy (it has no queue and no pub/sub).
pub const BASELINE_POLL: Duration = Duration::from_millis(1);

const UNLOCK: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end";
const EXTEND: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    Baseline,
    Rslock,
    RedisLock,
    Distlock,
    /// Redisson's scripts, no waiting strategy: a floor for any Redisson-compatible lock.
    RedissonLua,
}

impl Lib {
    pub const ALL: [Lib; 5] = [
        Lib::Baseline,
        Lib::Rslock,
        Lib::RedisLock,
        Lib::Distlock,
        Lib::RedissonLua,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Lib::Baseline => "baseline",
            Lib::Rslock => "rslock",
            Lib::RedisLock => "redis-lock",
            Lib::Distlock => "distlock",
            Lib::RedissonLua => "redisson-lua",
        }
    }

    /// Why a scenario does not apply to this library, if it does not.
    pub fn not_in(self, scenario: char) -> Option<&'static str> {
        match (self, scenario) {
            (Lib::RedissonLua, 'C' | 'D') => Some("reference scripts: no waiting or watchdog"),
            (Lib::RedisLock, 'D') => Some("no extend/renew API"),
            _ => None,
        }
    }

    /// Whether the library sends `SET` itself (for counting sent commands).
    pub fn sends_set(self) -> bool {
        matches!(self, Lib::Baseline | Lib::Rslock)
    }
}

/// The hand-written minimum: `SET NX PX`, then EVALSHA compare-and-delete, on one
/// multiplexed connection; a busy lock is polled every [`BASELINE_POLL`].
#[derive(Clone)]
pub struct Baseline {
    pub conn: MultiplexedConnection,
    unlock: Arc<Script>,
    extend: Arc<Script>,
    counter: Arc<AtomicU64>,
}

impl Baseline {
    pub async fn try_lock(&self, key: &str, lease: Duration) -> Result<Option<String>, String> {
        let token = format!("bl-{}", self.counter.fetch_add(1, Ordering::Relaxed));
        let mut conn = self.conn.clone();
        let ok: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(lease.as_millis() as u64)
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(ok.map(|_| token))
    }

    pub async fn unlock(&self, key: &str, token: &str) -> Result<(), String> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .unlock
            .key(key)
            .arg(token)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// One pipelined flight that extends every `(key, token)`: one EVALSHA each.
    pub async fn extend_all(&self, held: &[(String, String)], lease: Duration) -> usize {
        let mut pipe = redis::pipe();
        for (key, token) in held {
            pipe.invoke_script(
                self.extend
                    .key(key)
                    .arg(token)
                    .arg(lease.as_millis() as u64),
            );
        }
        let mut conn = self.conn.clone();
        let answers: Vec<i64> = pipe.query_async(&mut conn).await.unwrap_or_default();
        answers.iter().filter(|&&a| a == 1).count()
    }
}

/// Redisson 3.27's lock and unlock scripts on one multiplexed connection, as one Redisson
/// thread sends them (no pub/sub: only for uncontended scenarios).
#[derive(Clone)]
pub struct RedissonLua {
    conn: MultiplexedConnection,
    lock: Arc<Script>,
    unlock: Arc<Script>,
    owner: String,
}

impl RedissonLua {
    async fn lock(&self, name: &str) -> Result<(), String> {
        let mut conn = self.conn.clone();
        let busy: Option<i64> = self
            .lock
            .key(name)
            .arg(LEASE.as_millis() as u64)
            .arg(&self.owner)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        match busy {
            None => Ok(()),
            Some(_) => Err("redisson-lua: busy (it has no waiting strategy here)".to_owned()),
        }
    }

    async fn unlock(&self, name: &str) -> Result<(), String> {
        let mut conn = self.conn.clone();
        let _: Option<i64> = self
            .unlock
            .key(name)
            .key(format!("redisson_lock__channel:{{{name}}}"))
            .key(redisson_scripts::unlock_latch(name, &self.owner))
            .arg(0)
            .arg(LEASE.as_millis() as u64)
            .arg(&self.owner)
            .arg("PUBLISH")
            .arg(13_500)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// One library's client, cheap to clone into tasks.
#[derive(Clone)]
pub enum Peer {
    Baseline(Baseline),
    Rslock(rslock::LockManager),
    RedisLock(redis027::Client),
    Distlock(lock_core::LockClient),
    RedissonLua(RedissonLua),
}

/// A held lock of any library.
pub enum Held {
    Baseline(String, String),
    Rslock(rslock::Lock),
    RedisLock(String),
    Distlock(lock_core::LockGuard),
    RedissonLua(String),
}

impl Peer {
    pub async fn new(lib: Lib, url: &str) -> Result<Self, String> {
        Ok(match lib {
            Lib::Baseline => {
                let client = redis::Client::open(url).map_err(|e| e.to_string())?;
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| e.to_string())?;
                let (unlock, extend) = (Script::new(UNLOCK), Script::new(EXTEND));
                for s in [&unlock, &extend] {
                    let _: String = s.load_async(&mut conn).await.map_err(|e| e.to_string())?;
                }
                Peer::Baseline(Baseline {
                    conn,
                    unlock: Arc::new(unlock),
                    extend: Arc::new(extend),
                    counter: Arc::default(),
                })
            }
            Lib::Rslock => Peer::Rslock(rslock::LockManager::new(vec![url.to_owned()])),
            Lib::RedisLock => {
                let client = redis027::Client::open(url).map_err(|e| e.to_string())?;
                redis_lock::setup(&client)
                    .await
                    .map_err(|e| e.to_string())?;
                Peer::RedisLock(client)
            }
            Lib::Distlock => Peer::Distlock(
                lock_core::LockClient::builder(url)
                    .build()
                    .map_err(|e| e.to_string())?,
            ),
            Lib::RedissonLua => {
                let client = redis::Client::open(url).map_err(|e| e.to_string())?;
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| e.to_string())?;
                let (lock, unlock) = (
                    Script::new(redisson_scripts::LOCK),
                    Script::new(redisson_scripts::UNLOCK),
                );
                for s in [&lock, &unlock] {
                    let _: String = s.load_async(&mut conn).await.map_err(|e| e.to_string())?;
                }
                Peer::RedissonLua(RedissonLua {
                    conn,
                    lock: Arc::new(lock),
                    unlock: Arc::new(unlock),
                    owner: "0c0ffee0-0000-4000-8000-000000000000:1".to_owned(),
                })
            }
        })
    }

    /// Takes `name`, waiting with the library's default strategy.
    pub async fn lock(&self, name: &str) -> Result<Held, String> {
        match self {
            Peer::Baseline(b) => loop {
                if let Some(token) = b.try_lock(name, LEASE).await? {
                    return Ok(Held::Baseline(name.to_owned(), token));
                }
                tokio::time::sleep(BASELINE_POLL).await;
            },
            // `acquire` loops `lock()` (3 tries, random 0–200 ms apart) until it gets it.
            Peer::Rslock(m) => m
                .acquire_no_guard(name, LEASE)
                .await
                .map(Held::Rslock)
                .map_err(|e| e.to_string()),
            // `acquire_default`: 1 h expiration, 60 s timeout, 1 s sleep between tries.
            Peer::RedisLock(c) => {
                let mut lock =
                    redis_lock::MultiResourceLock::new(c.clone()).map_err(|e| e.to_string())?;
                match lock.acquire_default(&[name.to_owned()]).await {
                    Ok(Some(id)) => Ok(Held::RedisLock(id)),
                    Ok(None) => Err("redis-lock: timed out".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            }
            // Default: wait up to 30 s in the fair queue, watchdog lease.
            Peer::Distlock(c) => c
                .lock(name)
                .await
                .map(Held::Distlock)
                .map_err(|e| e.to_string()),
            Peer::RedissonLua(r) => r
                .lock(name)
                .await
                .map(|()| Held::RedissonLua(name.to_owned())),
        }
    }

    pub async fn unlock(&self, held: Held) -> Result<(), String> {
        match (self, held) {
            (Peer::Baseline(b), Held::Baseline(key, token)) => b.unlock(&key, &token).await,
            (Peer::Rslock(m), Held::Rslock(lock)) => {
                m.unlock(&lock).await;
                Ok(())
            }
            (Peer::RedisLock(c), Held::RedisLock(id)) => {
                let mut lock =
                    redis_lock::MultiResourceLock::new(c.clone()).map_err(|e| e.to_string())?;
                lock.release(&id).await.map(drop).map_err(|e| e.to_string())
            }
            (Peer::Distlock(_), Held::Distlock(guard)) => {
                guard.release().await.map_err(|e| e.to_string())
            }
            (Peer::RedissonLua(r), Held::RedissonLua(name)) => r.unlock(&name).await,
            _ => Err("held lock of another library".to_owned()),
        }
    }
}
