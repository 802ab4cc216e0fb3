//! Guarded writes: Redis commands that commit only while this hold is current, checked
//! and written in one atomic call — etcd's `Mutex.IsOwner()` inside a transaction, for data
//! that lives in the lock's Redis.

use redis::{FromRedisValue, Pipeline};

use crate::error::LockError;
use crate::lock::current_lock::LockInfo;
use crate::lock::guard::LockGuard;
use crate::lock::held::Held;
#[cfg(feature = "cluster")]
use crate::protocol::write_commands::SameSlot;
use crate::protocol::write_commands::{guarded_write, GuardedReply};

impl LockGuard {
    /// Runs `commands` in one atomic call **if and only if this hold is still the current
    /// one** (this owner, this fencing token), and returns their replies as a pipeline's
    /// (`T` reads the array of replies, e.g. `(i64, ())` or `Vec<redis::Value>`).
    /// Otherwise nothing is written and the call fails with [`LockError::Lost`].
    ///
    /// A holder paused past its lease (GC, `SIGSTOP`, a slow VM) and woken after another
    /// holder took the lock cannot write stale data this way: the check and the write are
    /// one call in Redis. This covers data in the lock's Redis only; any other resource
    /// still needs [fencing tokens](Self::fencing_token).
    ///
    /// Works on an exclusive lock, the write side of a read-write lock and a semaphore's
    /// permit, on one server, Sentinel or a Cluster. On a Cluster every key must be in the
    /// lock's slot: name keys with [`key`](Self::key). As with a redis-rs `MULTI`/`EXEC`
    /// pipeline, every command runs; one that fails at run time (`WRONGTYPE`) fails the
    /// call with its error and undoes nothing. Replies are those of every command
    /// (`ignore()` has no effect here).
    ///
    /// Allowed commands — everything else is refused before anything is sent: strings
    /// (`GET` `SET` `SETNX` `SETEX` `PSETEX` `GETSET` `GETDEL` `GETEX` `APPEND` `INCR`
    /// `INCRBY` `INCRBYFLOAT` `DECR` `DECRBY` `STRLEN` `SETRANGE` `GETRANGE` `MGET` `MSET`),
    /// hashes (`HSET` `HSETNX` `HGET` `HMGET` `HDEL` `HINCRBY` `HINCRBYFLOAT` `HGETALL`
    /// `HEXISTS` `HLEN` `HKEYS` `HVALS`), lists (`LPUSH` `RPUSH` `LPOP` `RPOP` `LRANGE`
    /// `LLEN` `LREM` `LSET` `LTRIM` `LINDEX`), sets (`SADD` `SREM` `SISMEMBER` `SMEMBERS`
    /// `SCARD`), sorted sets (`ZADD` `ZREM` `ZINCRBY` `ZSCORE` `ZRANGE` `ZCARD` `ZRANK`
    /// `ZCOUNT`), streams (`XADD` `XLEN` `XTRIM` `XDEL`) and keys (`DEL` `UNLINK` `EXISTS`
    /// `EXPIRE` `PEXPIRE` `EXPIREAT` `PEXPIREAT` `PERSIST` `TTL` `PTTL` `TYPE`).
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
    /// let guard = client.lock("item_7").await?;
    /// let stock = guard.key("stock"); // `{distlock:item_7}:stock`: the lock's slot
    /// let mut sale = redis::pipe();
    /// sale.cmd("DECR").arg(&stock).cmd("RPUSH").arg(guard.key("buyers")).arg("alice");
    /// let (left, _buyers): (i64, i64) = guard.write(&sale).await?;
    /// println!("{left} left");
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] when the hold is no longer current (nothing was written);
    /// [`LockError::InvalidRequest`] for a command not allowed, a key of another Cluster
    /// slot, one of the lock's own keys, a read hold, or Redlock (no single Redis to write
    /// to), or replies that do not read as `T` (the commands ran); the Redis errors,
    /// among them a command's own failure at run time ([`LockError::Refused`] for
    /// `WRONGTYPE`).
    ///
    /// # Cancel safety
    /// Dropped after the call was sent, the commands may or may not have run (all or none).
    pub async fn write<T: FromRedisValue>(&self, commands: &Pipeline) -> Result<T, LockError> {
        write(self.held(), commands).await
    }

    /// The key `{<lock key>}:<suffix>`: in the lock's Cluster slot, so that a
    /// [guarded write](Self::write) may write it.
    pub fn key(&self, suffix: &str) -> String {
        key(self.held(), suffix)
    }
}

impl LockInfo {
    /// [`LockGuard::write`] under the hold this info describes — the current lock of a
    /// `#[distributed_lock]` body or a lock-tower handler ([`current_lock`](crate::current_lock)).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), lock_core::LockError> {
    /// let lock = lock_core::current_lock().expect("inside a locked fn");
    /// // redis-rs as lock-core re-exports it: the `Pipeline` the signature names.
    /// let mut pipe = lock_core::redis::pipe();
    /// pipe.cmd("DECR").arg(lock.key("stock"));
    /// let (left,): (i64,) = lock.write(&pipe).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::write`]; [`LockError::Lost`] too once the hold has ended here.
    ///
    /// # Cancel safety
    /// As [`LockGuard::write`].
    pub async fn write<T: FromRedisValue>(&self, commands: &Pipeline) -> Result<T, LockError> {
        match self.held() {
            Some(held) => write(&held, commands).await,
            None => Err(LockError::Lost {
                name: self.name().clone(),
                reason: "its hold has ended: the guarded write was not sent",
            }),
        }
    }

    /// As [`LockGuard::key`]; `None` once the hold has ended here.
    pub fn key(&self, suffix: &str) -> Option<String> {
        self.held().map(|held| key(&held, suffix))
    }
}

fn key(held: &Held, suffix: &str) -> String {
    format!(
        "{{{}}}:{suffix}",
        String::from_utf8_lossy(held.identity.keys.lock())
    )
}

/// One guarded write under `held`; a refusal marks the hold lost.
async fn write<T: FromRedisValue>(held: &Held, commands: &Pipeline) -> Result<T, LockError> {
    let engine = &held.engine;
    let invalid = |reason: String| LockError::InvalidRequest {
        name: held.name.clone(),
        reason,
    };
    if engine.nodes.len() > 1 {
        return Err(invalid(
            "guarded writes need one Redis (a server, Sentinel or a Cluster): under Redlock \
             no single Redis holds the data"
                .to_owned(),
        ));
    }
    // Only a Cluster spreads keys over nodes.
    #[cfg(feature = "cluster")]
    let same_slot = held
        .identity
        .keys
        .is_sharded()
        .then_some(&same_slot as SameSlot<'_>);
    #[cfg(not(feature = "cluster"))]
    let same_slot = None;
    let call = guarded_write(
        &held.identity.keys,
        &held.identity.owner,
        held.token,
        commands,
        same_slot,
    )
    .map_err(invalid)?;
    let GuardedReply(replies) = engine.call_one(&held.name, call).await?;
    let Some(replies) = replies else {
        held.mark_lost("a guarded write found the hold no longer current: nothing was written");
        return Err(held.lost_error());
    };
    T::from_redis_value(replies).map_err(|error| {
        invalid(format!(
            "the guarded write's replies do not read as asked: {error}"
        ))
    })
}

/// True when two keys share a Cluster slot.
#[cfg(feature = "cluster")]
fn same_slot(a: &[u8], b: &[u8]) -> bool {
    use redis::cluster_routing::Slot;
    Slot::for_key(a) == Slot::for_key(b)
}
