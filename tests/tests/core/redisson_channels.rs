//! Redisson reads every message on its lock channels as a number (`LongCodec`): hand-offs
//! between distlock waiters travel on distlock's own channels, one per waiting client, and
//! every payload on Redisson's channels decodes as Redisson decodes it and means what it
//! means there.

use std::time::Duration;

use distlock_tests::locks::{builder, wait_until, GENEROUS};
use distlock_tests::redisson::{RedissonLock, RedissonMessage, RedissonRwLock};
use distlock_tests::RedisServer;
use futures_util::StreamExt;
use lock_core::LockClient;
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(30);
/// Published last: the monitor has seen every earlier message once it sees this.
const END: &str = "test:monitor-end";

/// Every message on `channel` and on every grants channel, collected until [`END`].
async fn monitor(
    server: &RedisServer,
    channel: &str,
) -> mpsc::UnboundedReceiver<(String, Vec<u8>)> {
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    for channel in [channel, END] {
        pubsub.subscribe(channel).await.unwrap();
    }
    pubsub.psubscribe("distlock__claim:*").await.unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let channel = message.get_channel_name().to_owned();
            if channel == END {
                return;
            }
            let _ = tx.send((channel, message.get_payload_bytes().to_vec()));
        }
    });
    rx
}

/// Ends the monitor and answers what it saw, by channel.
async fn collected(
    conn: &mut MultiplexedConnection,
    mut seen: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
) -> Vec<(String, Vec<u8>)> {
    let _: usize = redis::cmd("PUBLISH")
        .arg(END)
        .arg("end")
        .query_async(conn)
        .await
        .unwrap();
    let mut all = Vec::new();
    while let Some(message) = tokio::time::timeout(GENEROUS, seen.recv())
        .await
        .expect("monitor ended")
    {
        all.push(message);
    }
    all
}

/// Waiters in the queue `key`.
async fn queued(conn: &MultiplexedConnection, key: &str) -> usize {
    distlock_tests::locks::queued(&mut conn.clone(), key).await
}

async fn subscribers(conn: &MultiplexedConnection, channel: &str) -> usize {
    let mut conn = conn.clone();
    let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .unwrap();
    counts[0].1
}

/// A distlock waiter of `locks` on `name` that holds briefly once granted.
fn distlock_waiter(
    locks: &LockClient,
    name: &'static str,
    write: Option<bool>,
) -> tokio::task::JoinHandle<()> {
    let locks = locks.clone();
    tokio::spawn(async move {
        let request = match write {
            None => locks.lock(name),
            Some(true) => locks.write_lock(name),
            Some(false) => locks.read_lock(name),
        };
        // The wait spans the test's set-up (several waits of up to GENEROUS each) before the
        // release; the test bounds each waiter after the release.
        let guard = request.wait(GENEROUS * 8).await.expect("granted");
        guard.release().await.unwrap();
    })
}

/// Asserts that every payload on a Redisson channel decodes and that the grants went
/// elsewhere: `grants` of them, each on `<grants>:<client id>` of the owner it names (its
/// own process's channel). Answers the channels they went on.
fn check(
    seen: &[(String, Vec<u8>)],
    redisson_channel: &str,
    grants: &str,
    count: usize,
) -> Vec<String> {
    let on_redisson: Vec<RedissonMessage> = seen
        .iter()
        .filter(|(c, _)| c == redisson_channel)
        .map(|(_, payload)| RedissonMessage::decode(payload))
        .collect();
    println!("redisson channels: {redisson_channel} got {on_redisson:?}");
    assert!(
        on_redisson.iter().all(|m| m.wakes()),
        "only Redisson's own messages go on its channel: {on_redisson:?}"
    );
    assert!(!on_redisson.is_empty(), "the releases reached Redisson");
    let handed: Vec<&(String, Vec<u8>)> =
        seen.iter().filter(|(c, _)| c != redisson_channel).collect();
    assert_eq!(
        handed.len(),
        count,
        "hand-offs on distlock's channels: {handed:?}"
    );
    for (channel, payload) in &handed {
        let payload = String::from_utf8_lossy(payload);
        let owner = payload.strip_prefix("distlock:grant:").expect("a grant");
        let client = owner.split(':').next().unwrap();
        assert_eq!(
            *channel,
            format!("{grants}:{client}"),
            "a grant goes to its owner's client only"
        );
    }
    handed.iter().map(|(c, _)| c.clone()).collect()
}

/// Two distlock waiters are handed the lock in turn while a Redisson-protocol waiter waits
/// too: the hand-offs never reach Redisson's channel, its waiter wakes on the last release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_stay_off_redissons_lock_channel() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = builder(&server.url()).key_prefix("").build().unwrap();
    let seen = monitor(&server, "redisson_lock__channel:{mixed}").await;
    let holder = locks.lock("mixed").await.unwrap();
    let first = distlock_waiter(&locks, "mixed", None);
    wait_until("the first waiter queued", GENEROUS, || async {
        queued(&conn, "distlock__wait:{mixed}").await == 1
    })
    .await;
    let other = builder(&server.url()).key_prefix("").build().unwrap();
    let second = distlock_waiter(&other, "mixed", None);
    wait_until("both waiters queued", GENEROUS, || async {
        queued(&conn, "distlock__wait:{mixed}").await == 2
    })
    .await;
    // Each client listens on its own grants channel (it subscribes after its first try).
    for client in [&locks, &other] {
        let own = format!("distlock__claim:{{mixed}}:{}", client.id());
        wait_until(&own, GENEROUS, || async {
            subscribers(&conn, &own).await == 1
        })
        .await;
    }
    // The monitor and both distlock clients listen on Redisson's channel already (it passed
    // with `== 2` only while the pub/sub keep-alive made the connections again every 5 s).
    let listening = subscribers(&conn, "redisson_lock__channel:{mixed}").await;
    let mut java = RedissonLock::new(&server.url(), "mixed", 1).await;
    let redisson = tokio::spawn(async move {
        java.lock(LEASE, GENEROUS).await;
        assert_eq!(java.unlock(LEASE).await, Some(1));
    });
    wait_until("Redisson waits", GENEROUS, || async {
        subscribers(&conn, "redisson_lock__channel:{mixed}").await == listening + 1
    })
    .await;
    holder.release().await.unwrap();
    for task in [first, second, redisson] {
        tokio::time::timeout(GENEROUS, task)
            .await
            .expect("done")
            .unwrap();
    }
    let seen = collected(&mut conn.clone(), seen).await;
    let channels = check(
        &seen,
        "redisson_lock__channel:{mixed}",
        "distlock__claim:{mixed}",
        2,
    );
    assert_ne!(channels[0], channels[1], "two clients, two channels");
}

/// The same on a read-write lock: a writer hands to a writer, that one to a reader, and a
/// Redisson-protocol writer waits on `redisson_rwlock:{…}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_stay_off_redissons_rwlock_channel() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = builder(&server.url()).key_prefix("").build().unwrap();
    let seen = monitor(&server, "redisson_rwlock:{mixed_rw}").await;
    let holder = locks.write_lock("mixed_rw").await.unwrap();
    let writer = distlock_waiter(&locks, "mixed_rw", Some(true));
    let queue = "distlock__rwwait:{mixed_rw}";
    wait_until("the writer queued", GENEROUS, || async {
        queued(&conn, queue).await == 1
    })
    .await;
    let reader = distlock_waiter(&locks, "mixed_rw", Some(false));
    wait_until("the reader queued", GENEROUS, || async {
        queued(&conn, queue).await == 2
    })
    .await;
    // The monitor and the distlock client (its queued waiters) listen on Redisson's
    // channel already: counted first, as the exclusive lock's test above does (`== 2`
    // passed at once, before Redisson listened, and failed when Redisson was quicker).
    let listening = subscribers(&conn, "redisson_rwlock:{mixed_rw}").await;
    let mut java = RedissonRwLock::new(&server.url(), "mixed_rw", 1).await;
    let redisson = tokio::spawn(async move {
        java.write(LEASE, GENEROUS).await;
        assert_eq!(java.unlock_write(LEASE).await, Some(1));
    });
    wait_until("Redisson waits", GENEROUS, || async {
        subscribers(&conn, "redisson_rwlock:{mixed_rw}").await == listening + 1
    })
    .await;
    holder.release().await.unwrap();
    for task in [writer, reader, redisson] {
        tokio::time::timeout(GENEROUS, task)
            .await
            .expect("done")
            .unwrap();
    }
    let seen = collected(&mut conn.clone(), seen).await;
    check(
        &seen,
        "redisson_rwlock:{mixed_rw}",
        "distlock__claim:{mixed_rw}",
        2,
    );
}
