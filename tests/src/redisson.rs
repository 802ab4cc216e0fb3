//! A test client that speaks Redisson's `RLock` protocol (3.x): the lock, unlock and renew
//! scripts Redisson sends, its owner ids (`<uuid>:<thread id>`), its release channel and
//! message. Used to prove that distlock and a Java service exclude each other. On a Cluster
//! it waits and publishes with sharded pub/sub, as Redisson 3.23+ does there.

use std::time::Duration;

use distlock_examples::redisson_scripts::{
    LOCK, READ_LOCK, READ_UNLOCK, RENEW, UNLOCK, WRITE_LOCK, WRITE_UNLOCK,
};
use futures_util::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, PushKind, RedisFuture, Script, Value};

/// One Redisson "thread" on one lock name.
#[derive(Debug)]
pub struct RedissonLock {
    conn: Conn,
    name: String,
    owner: String,
}

/// The commands' connection, and where `lock()` waits: one server's pub/sub, or a
/// Cluster's sharded pub/sub.
enum Conn {
    Single(MultiplexedConnection, Box<redis::Client>),
    Cluster(ClusterConnection, Vec<String>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Single(..) => "Conn::Single",
            Self::Cluster(..) => "Conn::Cluster",
        })
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn, _) => conn.req_packed_command(cmd),
            Self::Cluster(conn, _) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn, _) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn, _) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}

impl RedissonLock {
    /// A lock `name` (the raw Redis key, as `getLock(name)`) for thread `thread` of a new
    /// Redisson instance.
    pub async fn new(url: &str, name: &str, thread: u64) -> Self {
        let client = redis::Client::open(url).expect("url");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Self {
            conn: Conn::Single(conn, Box::new(client)),
            name: name.to_owned(),
            owner: format!("{}:{thread}", uuid_like()),
        }
    }

    /// The same on a Redis Cluster found through `seeds`, with sharded pub/sub.
    pub async fn cluster(seeds: &[String], name: &str, thread: u64) -> Self {
        let conn = ClusterClientBuilder::new(seeds.to_vec())
            .build()
            .expect("seeds")
            .get_async_connection()
            .await
            .expect("connect");
        Self {
            conn: Conn::Cluster(conn, seeds.to_vec()),
            name: name.to_owned(),
            owner: format!("{}:{thread}", uuid_like()),
        }
    }

    /// Redisson's release channel for this lock.
    pub fn channel(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.name)
    }

    /// One `tryLock` attempt: `None` when acquired, else the holder's PTTL in ms.
    pub async fn try_lock(&mut self, lease: Duration) -> Option<i64> {
        Script::new(LOCK)
            .key(&self.name)
            .arg(lease.as_millis() as u64)
            .arg(&self.owner)
            .invoke_async(&mut self.conn)
            .await
            .expect("lock script")
    }

    /// `lock()` as Redisson waits: subscribe to the channel, retry on each message or when
    /// the holder's TTL runs out; bounded by `bound`.
    pub async fn lock(&mut self, lease: Duration, bound: Duration) {
        if self.try_lock(lease).await.is_none() {
            return;
        }
        let deadline = tokio::time::Instant::now() + bound;
        let mut messages = self.subscribe().await;
        loop {
            let Some(ttl) = self.try_lock(lease).await else {
                return;
            };
            assert!(
                tokio::time::Instant::now() < deadline,
                "redisson lock() timed out"
            );
            let ttl = Duration::from_millis(ttl.max(1).unsigned_abs());
            let _ = tokio::time::timeout(ttl, messages.next()).await;
        }
    }

    /// The release messages of this lock's channel, subscribed before this returns: each
    /// decoded as Redisson does (a `Long`, panicking otherwise), and only those Redisson
    /// wakes on (`0`, `1`).
    async fn subscribe(&self) -> futures_util::stream::BoxStream<'static, ()> {
        let wakes = |payload: &[u8]| std::future::ready(RedissonMessage::decode(payload).wakes());
        match &self.conn {
            Conn::Single(_, client) => {
                let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
                pubsub.subscribe(self.channel()).await.expect("subscribe");
                pubsub
                    .into_on_message()
                    .filter(move |message| wakes(message.get_payload_bytes()))
                    .map(|_| ())
                    .boxed()
            }
            Conn::Cluster(_, seeds) => {
                let (pushes, mut received) = tokio::sync::mpsc::unbounded_channel();
                let mut conn = ClusterClientBuilder::new(seeds.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(pushes)
                    .build()
                    .expect("seeds")
                    .get_async_connection()
                    .await
                    .expect("connect");
                conn.ssubscribe(self.channel()).await.expect("ssubscribe");
                futures_util::stream::poll_fn(move |cx| received.poll_recv(cx))
                    .filter(move |push: &redis::PushInfo| {
                        let payload = match push.data.get(1) {
                            Some(Value::BulkString(bytes)) => Some(bytes.as_slice()),
                            _ => None,
                        };
                        match (push.kind == PushKind::SMessage, payload) {
                            (true, Some(payload)) => wakes(payload),
                            _ => std::future::ready(false),
                        }
                    })
                    // The connection lives as long as the stream.
                    .map(move |_| {
                        let _ = &conn;
                    })
                    .boxed()
            }
        }
    }

    /// Redisson's `unlock()`: true when this released the lock (published `0`).
    pub async fn unlock(&mut self, lease: Duration) -> Option<i64> {
        let latch = format!("redisson_unlock_latch:{{{}}}:{}", self.name, uuid_like());
        Script::new(UNLOCK)
            .key(&self.name)
            .key(self.channel())
            .key(latch)
            .arg(0)
            .arg(lease.as_millis() as u64)
            .arg(&self.owner)
            .arg(match self.conn {
                Conn::Single(..) => "PUBLISH",
                Conn::Cluster(..) => "SPUBLISH",
            })
            .arg(13_500)
            .invoke_async(&mut self.conn)
            .await
            .expect("unlock script")
    }

    /// One watchdog renewal: true when still held.
    pub async fn renew(&mut self, lease: Duration) -> bool {
        let renewed: i64 = Script::new(RENEW)
            .key(&self.name)
            .arg(lease.as_millis() as u64)
            .arg(&self.owner)
            .invoke_async(&mut self.conn)
            .await
            .expect("renew script");
        renewed == 1
    }
}

/// One Redisson "thread" on one `RReadWriteLock` (one server): its read and write sides,
/// with Redisson's scripts, owner names, timeout keys, channel and messages.
#[derive(Debug)]
pub struct RedissonRwLock {
    conn: MultiplexedConnection,
    client: redis::Client,
    name: String,
    owner: String,
}

impl RedissonRwLock {
    /// The read-write lock `name` (the raw Redis key, as `getReadWriteLock(name)`) for thread
    /// `thread` of a new Redisson instance.
    pub async fn new(url: &str, name: &str, thread: u64) -> Self {
        let client = redis::Client::open(url).expect("url");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Self {
            conn,
            client,
            name: name.to_owned(),
            owner: format!("{}:{thread}", uuid_like()),
        }
    }

    /// Redisson's channel of a read-write lock.
    pub fn channel(&self) -> String {
        format!("redisson_rwlock:{{{}}}", self.name)
    }

    fn write_name(&self) -> String {
        format!("{}:write", self.owner)
    }

    /// One read `tryLock`: `None` when acquired, else the lock's PTTL.
    pub async fn try_read(&mut self, lease: Duration) -> Option<i64> {
        Script::new(READ_LOCK)
            .key(&self.name)
            .key(format!("{{{}}}:{}:rwlock_timeout", self.name, self.owner))
            .arg(lease.as_millis() as u64)
            .arg(&self.owner)
            .arg(self.write_name())
            .invoke_async(&mut self.conn)
            .await
            .expect("read lock script")
    }

    /// One write `tryLock`: `None` when acquired, else the lock's PTTL.
    pub async fn try_write(&mut self, lease: Duration) -> Option<i64> {
        Script::new(WRITE_LOCK)
            .key(&self.name)
            .arg(lease.as_millis() as u64)
            .arg(self.write_name())
            .invoke_async(&mut self.conn)
            .await
            .expect("write lock script")
    }

    /// `writeLock().lock()` as Redisson waits: subscribed to the channel, retrying on each
    /// message or when the TTL runs out; bounded by `bound`.
    pub async fn write(&mut self, lease: Duration, bound: Duration) {
        if self.try_write(lease).await.is_none() {
            return;
        }
        let deadline = tokio::time::Instant::now() + bound;
        let mut pubsub = self.client.get_async_pubsub().await.expect("pubsub");
        pubsub.subscribe(self.channel()).await.expect("subscribe");
        let mut messages = pubsub.into_on_message().filter(|message| {
            std::future::ready(RedissonMessage::decode(message.get_payload_bytes()).wakes())
        });
        loop {
            let Some(ttl) = self.try_write(lease).await else {
                return;
            };
            assert!(
                tokio::time::Instant::now() < deadline,
                "redisson write lock() timed out"
            );
            let ttl = Duration::from_millis(ttl.max(1).unsigned_abs());
            let _ = tokio::time::timeout(ttl, messages.next()).await;
        }
    }

    /// The read side's `unlock()`: 1 when it deleted the lock, 0 when holds remain.
    pub async fn unlock_read(&mut self) -> Option<i64> {
        Script::new(READ_UNLOCK)
            .key(&self.name)
            .key(self.channel())
            .key(format!("{{{}}}:{}:rwlock_timeout", self.name, self.owner))
            .key(format!("{{{}}}", self.name))
            .key(format!(
                "redisson_unlock_latch:{{{}}}:{}",
                self.name,
                uuid_like()
            ))
            .arg(0)
            .arg(&self.owner)
            .arg("PUBLISH")
            .arg(13_500)
            .invoke_async(&mut self.conn)
            .await
            .expect("read unlock script")
    }

    /// The write side's `unlock()`.
    pub async fn unlock_write(&mut self, lease: Duration) -> Option<i64> {
        Script::new(WRITE_UNLOCK)
            .key(&self.name)
            .key(self.channel())
            .key(format!(
                "redisson_unlock_latch:{{{}}}:{}",
                self.name,
                uuid_like()
            ))
            .arg(1)
            .arg(lease.as_millis() as u64)
            .arg(self.write_name())
            .arg("PUBLISH")
            .arg(13_500)
            .invoke_async(&mut self.conn)
            .await
            .expect("write unlock script")
    }
}

/// A message on a Redisson lock's channel, read as Redisson's `LockPubSub` reads it: its
/// `LongCodec` decodes the payload as a decimal 64-bit integer (an `ERROR Unable to decode
/// data` with a `NumberFormatException` otherwise, and the messages behind it unread), then
/// `0` releases a waiter, `1` (a write lock's or read lock's release) all of them, and any
/// other number nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedissonMessage {
    /// `0`: `UNLOCK_MESSAGE`.
    Unlock,
    /// `1`: `READ_UNLOCK_MESSAGE`.
    ReadUnlock,
    /// Any other number: ignored.
    Ignored(i64),
}

impl RedissonMessage {
    /// Decodes `payload` as Redisson's `LongCodec` does (`Long.parseLong`).
    ///
    /// # Panics
    /// When Redisson could not decode it: it would log an error and drop what follows.
    pub fn decode(payload: &[u8]) -> Self {
        let text = std::str::from_utf8(payload).ok();
        // `Long.parseLong`: an optional sign, then ASCII digits only.
        let digits = text.map(|t| t.strip_prefix(['-', '+']).unwrap_or(t));
        let value = match (text, digits) {
            (Some(text), Some(d)) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
                text.parse::<i64>().ok()
            }
            _ => None,
        };
        match value {
            Some(0) => Self::Unlock,
            Some(1) => Self::ReadUnlock,
            Some(n) => Self::Ignored(n),
            None => panic!(
                "Redisson cannot decode {:?} on its lock channel (NumberFormatException)",
                String::from_utf8_lossy(payload)
            ),
        }
    }

    /// True when Redisson's waiters wake on it.
    pub fn wakes(self) -> bool {
        !matches!(self, Self::Ignored(_))
    }
}

/// A random UUID-shaped id, as Redisson's connection manager id.
fn uuid_like() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    let a = h.finish();
    let b = RandomState::new().build_hasher().finish();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        a & 0xffff,
        b & 0xfff,
        (b >> 12) & 0xfff,
        b >> 16 & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::RedissonMessage;

    #[test]
    fn payloads_decode_as_redissons_long_codec_reads_them() {
        assert_eq!(RedissonMessage::decode(b"0"), RedissonMessage::Unlock);
        assert_eq!(RedissonMessage::decode(b"1"), RedissonMessage::ReadUnlock);
        assert_eq!(
            RedissonMessage::decode(b"12345"),
            RedissonMessage::Ignored(12345)
        );
        assert!(!RedissonMessage::decode(b"-7").wakes());
    }

    /// The negative control: what distlock once published there must not decode.
    #[test]
    #[should_panic(expected = "NumberFormatException")]
    fn a_grant_message_does_not_decode() {
        RedissonMessage::decode(b"distlock:grant:3db65fe7:17:1795436339923456");
    }

    #[test]
    #[should_panic(expected = "NumberFormatException")]
    fn a_number_past_64_bits_does_not_decode() {
        RedissonMessage::decode(b"99999999999999999999");
    }
}
