//! The guarded resources of the fault suite, kept on a Redis server of their own (never the
//! lock's server, so faults injected into the lock's Redis leave them intact):
//!
//! * [`FencedStore`]: a counter that accepts a read or a write only with a fencing token at
//!   least the highest it has seen (and then remembers it), as Kleppmann's fenced storage;
//!   every accepted write is logged with its token.
//! * [`Counter`]: the same counter without fencing, to measure lost updates.
//!
//! A holder increments a counter by reading it and writing the value plus one. Every update
//! lost to two holders working at once shows as `writes - value`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult, Script};

/// Bound on one store command: the store is never faulted, only the machine is loaded.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// KEYS: highest, value, log, stats. ARGV: `read`/`write`, token, value (writes).
/// Answers `{1, value}` (read) or `{1, token}` (write) when accepted, `{0, highest}` when
/// the token is below the highest seen.
const FENCED: &str = r"
local highest = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[2])
if token < highest then
  redis.call('hincrby', KEYS[4], 'rejected_' .. ARGV[1], 1)
  return {0, highest}
end
redis.call('set', KEYS[1], ARGV[2])
if ARGV[1] == 'write' then
  redis.call('set', KEYS[2], ARGV[3])
  redis.call('rpush', KEYS[3], ARGV[2])
  redis.call('hincrby', KEYS[4], 'accepted_write', 1)
  return {1, token}
end
return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
";

async fn connect(url: &str) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(STORE_TIMEOUT))
        .set_response_timeout(Some(STORE_TIMEOUT));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// A token below the highest the store has seen: the operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stale {
    /// The highest token the store had seen.
    pub highest: u64,
}

/// A fenced counter named `name` on the store's Redis. Cheap to clone.
#[derive(Clone)]
pub struct FencedStore {
    conn: MultiplexedConnection,
    keys: [String; 4],
    script: Script,
}

impl std::fmt::Debug for FencedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedStore")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// What a fenced store holds, for the checks at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FencedStats {
    /// Highest token seen.
    pub highest: u64,
    /// The counter.
    pub value: u64,
    /// Tokens of the accepted writes, in the order they were accepted.
    pub write_log: Vec<u64>,
    /// Reads refused for a stale token.
    pub rejected_reads: u64,
    /// Writes refused for a stale token.
    pub rejected_writes: u64,
}

impl FencedStats {
    /// Accepted writes whose token was below one accepted before them (the store must keep
    /// this at zero).
    pub fn stale_accepted(&self) -> usize {
        let mut highest = 0;
        self.write_log
            .iter()
            .filter(|&&t| {
                let stale = t < highest;
                highest = highest.max(t);
                stale
            })
            .count()
    }

    /// Increments lost although the store accepted them: accepted writes minus the value.
    pub fn lost_updates(&self) -> u64 {
        (self.write_log.len() as u64).saturating_sub(self.value)
    }
}

impl FencedStore {
    /// Connects to the store at `url`; `name` keeps counters of different tests apart.
    pub async fn connect(url: &str, name: &str) -> RedisResult<FencedStore> {
        Ok(FencedStore {
            conn: connect(url).await?,
            keys: ["highest", "value", "log", "stats"].map(|k| format!("fenced:{{{name}}}:{k}")),
            script: Script::new(FENCED),
        })
    }

    async fn call(&mut self, op: &str, token: u64, value: u64) -> RedisResult<(bool, u64)> {
        let mut call = self.script.prepare_invoke();
        for key in &self.keys {
            call.key(key);
        }
        call.arg(op).arg(token).arg(value);
        let (accepted, n): (i64, u64) = call.invoke_async(&mut self.conn).await?;
        Ok((accepted == 1, n))
    }

    /// Reads the counter with `token`, which the store then remembers.
    pub async fn read(&mut self, token: u64) -> RedisResult<Result<u64, Stale>> {
        let (accepted, n) = self.call("read", token, 0).await?;
        Ok(if accepted {
            Ok(n)
        } else {
            Err(Stale { highest: n })
        })
    }

    /// Writes `value` with `token`.
    pub async fn write(&mut self, token: u64, value: u64) -> RedisResult<Result<(), Stale>> {
        let (accepted, n) = self.call("write", token, value).await?;
        Ok(if accepted {
            Ok(())
        } else {
            Err(Stale { highest: n })
        })
    }

    /// Everything the store holds.
    pub async fn stats(&mut self) -> RedisResult<FencedStats> {
        let [highest, value, log, stats] = &self.keys;
        /// GET highest, GET value, LRANGE log, HMGET of the two rejection counts.
        type Answer = (
            Option<u64>,
            Option<u64>,
            Vec<u64>,
            (Option<u64>, Option<u64>),
        );
        let (highest, value, write_log, (rejected_reads, rejected_writes)): Answer = redis::pipe()
            .get(highest)
            .get(value)
            .lrange(log, 0, -1)
            .cmd("HMGET")
            .arg(stats)
            .arg("rejected_read")
            .arg("rejected_write")
            .query_async(&mut self.conn)
            .await?;
        Ok(FencedStats {
            highest: highest.unwrap_or(0),
            value: value.unwrap_or(0),
            write_log,
            rejected_reads: rejected_reads.unwrap_or(0),
            rejected_writes: rejected_writes.unwrap_or(0),
        })
    }
}

/// An unfenced counter: plain GET, then SET with the number of writes counted in the same
/// transaction, so `writes - value` is the number of lost updates.
#[derive(Clone)]
pub struct Counter {
    conn: MultiplexedConnection,
    value: String,
    writes: String,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

impl Counter {
    /// Connects to the store at `url`; `name` keeps counters apart.
    pub async fn connect(url: &str, name: &str) -> RedisResult<Counter> {
        Ok(Counter {
            conn: connect(url).await?,
            value: format!("counter:{{{name}}}:value"),
            writes: format!("counter:{{{name}}}:writes"),
        })
    }

    /// The counter.
    pub async fn read(&mut self) -> RedisResult<u64> {
        let value: Option<u64> = redis::cmd("GET")
            .arg(&self.value)
            .query_async(&mut self.conn)
            .await?;
        Ok(value.unwrap_or(0))
    }

    /// Sets the counter and counts the write.
    pub async fn write(&mut self, value: u64) -> RedisResult<()> {
        redis::pipe()
            .atomic()
            .set(&self.value, value)
            .ignore()
            .incr(&self.writes, 1)
            .ignore()
            .query_async(&mut self.conn)
            .await
    }

    /// `(writes, value)`: their difference is the number of lost updates.
    pub async fn totals(&mut self) -> RedisResult<(u64, u64)> {
        let (writes, value): (Option<u64>, Option<u64>) = redis::pipe()
            .get(&self.writes)
            .get(&self.value)
            .query_async(&mut self.conn)
            .await?;
        Ok((writes.unwrap_or(0), value.unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisServer;

    #[test]
    fn stale_accepted_counts_writes_below_an_earlier_one() {
        let stats = FencedStats {
            write_log: vec![1, 2, 2, 1, 3, 2],
            value: 6,
            ..FencedStats::default()
        };
        assert_eq!(stats.stale_accepted(), 2);
        assert_eq!(stats.lost_updates(), 0);
    }

    #[tokio::test]
    async fn fenced_store_refuses_lower_tokens_on_read_and_write() {
        let server = RedisServer::start();
        let mut store = FencedStore::connect(&server.url(), "t").await.unwrap();
        assert_eq!(store.read(5).await.unwrap(), Ok(0));
        assert_eq!(store.write(5, 1).await.unwrap(), Ok(()));
        assert_eq!(store.read(4).await.unwrap(), Err(Stale { highest: 5 }));
        assert_eq!(store.read(7).await.unwrap(), Ok(1));
        // 5 was fine before 7 was seen; now it is stale, for writes too.
        assert_eq!(store.write(5, 2).await.unwrap(), Err(Stale { highest: 7 }));
        assert_eq!(store.write(7, 2).await.unwrap(), Ok(()));
        let stats = store.stats().await.unwrap();
        assert_eq!(
            stats,
            FencedStats {
                highest: 7,
                value: 2,
                write_log: vec![5, 7],
                rejected_reads: 1,
                rejected_writes: 1,
            }
        );
        assert_eq!((stats.stale_accepted(), stats.lost_updates()), (0, 0));
    }

    #[tokio::test]
    async fn counter_shows_lost_updates() {
        let server = RedisServer::start();
        let mut a = Counter::connect(&server.url(), "c").await.unwrap();
        let mut b = a.clone();
        let (va, vb) = (a.read().await.unwrap(), b.read().await.unwrap());
        a.write(va + 1).await.unwrap();
        b.write(vb + 1).await.unwrap();
        assert_eq!(a.totals().await.unwrap(), (2, 1));
    }
}
