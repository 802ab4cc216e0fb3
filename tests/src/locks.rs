//! Helpers for tests of the lock engine: clients, Redis probes, event waits, checkers.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use lock_core::{LockClient, LockClientBuilder};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// Upper bound for "soon" on a loaded 2-core machine: waits end on the event, not on this.
pub const GENEROUS: Duration = Duration::from_secs(10);

/// Prints the engine's tracing events when `RUST_LOG` is set (e.g.
/// `RUST_LOG=lock_core=debug`), for diagnosing a failing test; a no-op otherwise.
pub fn trace() {
    let Some(filter) = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| f.parse::<tracing_subscriber::filter::Targets>().ok())
    else {
        return;
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_test_writer())
        .with(filter)
        .try_init();
}

/// A client with default settings except a command timeout that tolerates a loaded machine.
pub fn client(url: &str) -> LockClient {
    builder(url).build().expect("valid test client")
}

/// The builder [`client`] uses, to adjust before `build()`.
pub fn builder(url: &str) -> LockClientBuilder {
    LockClient::builder(url).command_timeout(Duration::from_secs(5))
}

/// The Redis key of the lock `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("{}{name}", LockClientBuilder::DEFAULT_KEY_PREFIX)
}

/// The fair queue of the exclusive lock of `name` (default prefix).
pub fn queue_key(name: &str) -> String {
    format!("distlock__wait:{{{}}}", lock_key(name))
}

/// The fair queue of the read-write lock of `name` (default prefix).
pub fn rw_queue_key(name: &str) -> String {
    format!("distlock__rwwait:{{{}}}", lock_key(name))
}

/// The fair queue of the semaphore `name` (default prefix).
pub fn sem_queue_key(name: &str) -> String {
    format!("distlock__semwait:{{{}}}", lock_key(name))
}

/// lock-core's `LIVE_BASE`: a waiter's deadline entry is scored `LIVE_BASE − deadline ms`.
const LIVE_BASE: u64 = 9_000_000_000_000_000;

/// Where a queue's deadline entries start: every arrival is scored below it.
const DEADLINES_FROM: u64 = LIVE_BASE / 2;

/// Waiters in the queue `queue`. Each waiter is two entries of the ZSET, its arrival and its
/// liveness deadline: this counts arrivals.
pub async fn queued(conn: &mut MultiplexedConnection, queue: &str) -> usize {
    redis::cmd("ZCOUNT")
        .arg(queue)
        .arg("-inf")
        .arg(format!("({DEADLINES_FROM}"))
        .query_async(conn)
        .await
        .unwrap()
}

/// Queues a waiter by hand, as the scripts do: `member` by arrival `arrival_us` (Redis
/// clock, µs) and alive until `deadline_ms` (Redis clock, ms).
pub async fn queue_waiter(
    conn: &mut MultiplexedConnection,
    queue: &str,
    member: &str,
    arrival_us: u64,
    deadline_ms: u64,
) {
    let _: () = redis::cmd("ZADD")
        .arg(queue)
        .arg(arrival_us)
        .arg(member)
        .arg(LIVE_BASE - deadline_ms)
        .arg(format!("~{member}"))
        .query_async(conn)
        .await
        .unwrap();
}

/// True if `key` exists.
pub async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    conn.exists(key).await.expect("EXISTS")
}

/// Zeroes the server's command counters (`CONFIG RESETSTAT`), before a counted call.
pub async fn reset_stats(conn: &mut MultiplexedConnection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
}

/// Calls per command since [`reset_stats`] (`INFO commandstats`: scripts' inner calls
/// count under their own names; this INFO is not counted yet), with the whole text for a
/// failure's message.
pub async fn command_calls(
    conn: &mut MultiplexedConnection,
) -> (std::collections::BTreeMap<String, u64>, String) {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let calls = stats
        .lines()
        .filter_map(|line| {
            let (command, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((command.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect();
    (calls, stats)
}

/// `FUNCTION LOAD` calls since [`reset_stats`] (or the server's start): by clients, and
/// also those a replica applied from its master's stream (not a library it got in a full
/// sync).
pub async fn library_loads(conn: &mut MultiplexedConnection) -> u64 {
    let (calls, _) = command_calls(conn).await;
    calls.get("function|load").copied().unwrap_or(0)
}

/// The name of this client's library, which carries its version: the first line of the
/// library's text names it (`#!lua name=<name>`).
pub const LIBRARY_NAME: &str = library_name(lock_core::ops::FUNCTIONS_SOURCE);

/// The library's name in `source`'s first line, `#!lua name=<name>`.
const fn library_name(source: &'static str) -> &'static str {
    let shebang = b"#!lua name=";
    let bytes = source.as_bytes();
    let mut end = shebang.len();
    while bytes[end] != b'\n' {
        end += 1;
    }
    let (line, _) = bytes.split_at(end);
    let (_, name) = line.split_at(shebang.len());
    match std::str::from_utf8(name) {
        Ok(name) => name,
        Err(_) => panic!("the library's name is UTF-8"),
    }
}

/// True when the server has distlock's library, of this client's version.
pub async fn has_library(conn: &mut MultiplexedConnection) -> bool {
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(LIBRARY_NAME)
        .query_async(conn)
        .await
        .expect("FUNCTION LIST");
    !libraries.is_empty()
}

/// The text of this client's library as the server has it (a call loads it first).
pub async fn library_code(conn: &mut MultiplexedConnection) -> String {
    let listing: Vec<Vec<redis::Value>> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(LIBRARY_NAME)
        .arg("WITHCODE")
        .query_async(conn)
        .await
        .expect("FUNCTION LIST");
    let library = listing.first().expect("the library is loaded");
    let at = (library.chunks(2))
        .find(|pair| matches!(&pair[0], redis::Value::BulkString(k) if k == b"library_code"))
        .expect("its code");
    redis::FromRedisValue::from_redis_value(at[1].clone()).expect("text")
}

/// Function calls (`FCALL`, `FCALL_RO`) since [`reset_stats`] (`None`: none), with the
/// stats' text.
pub async fn function_calls(conn: &mut MultiplexedConnection) -> (Option<u64>, String) {
    let (calls, stats) = command_calls(conn).await;
    let counted = ["fcall", "fcall_ro"].map(|c| calls.get(c).copied());
    let total = counted.iter().flatten().sum();
    (counted.iter().any(Option::is_some).then_some(total), stats)
}

/// The key's PTTL in ms (-2 missing, -1 no expiry).
pub async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// Every key of the server (KEYS: test servers are small), to check that nothing is left.
pub async fn keys_left(conn: &mut MultiplexedConnection) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*")
        .query_async(conn)
        .await
        .expect("KEYS")
}

/// Polls `check` every 10 ms until it is true; panics naming `what` after `bound`.
pub async fn wait_until<F, Fut>(what: &str, bound: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + bound;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {bound:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `key` is gone, within `bound`.
pub async fn wait_gone(conn: &mut MultiplexedConnection, key: &str, bound: Duration) {
    let what = format!("{key} is gone");
    wait_until(&what, bound, || {
        let mut conn = conn.clone();
        async move { !exists(&mut conn, key).await }
    })
    .await;
}

/// Counts critical sections that overlapped: `enter` when a holder starts, `exit` when done.
#[derive(Debug, Default)]
pub struct OverlapDetector {
    inside: AtomicBool,
    overlaps: AtomicUsize,
    entries: AtomicUsize,
}

impl OverlapDetector {
    /// A holder enters; an overlap is recorded if another is inside.
    pub fn enter(&self) {
        self.entries.fetch_add(1, Ordering::SeqCst);
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The holder leaves.
    pub fn exit(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }

    /// Overlaps seen so far.
    pub fn overlaps(&self) -> usize {
        self.overlaps.load(Ordering::SeqCst)
    }

    /// Critical sections entered so far.
    pub fn entries(&self) -> usize {
        self.entries.load(Ordering::SeqCst)
    }
}
