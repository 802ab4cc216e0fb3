//! Every operation is a function of one Redis Functions library, loaded where a call finds
//! it missing: after `FUNCTION FLUSH` (or a restart without persistence, or a new Cluster
//! master) one call loads it on that node and is sent again. Two versions of the library
//! run side by side on one server; a server without Redis Functions answers a typed error.

use std::time::Duration;

use distlock_tests::locks::{
    builder, client, command_calls, exists, library_code, library_loads, lock_key, pttl,
    wait_until, GENEROUS, LIBRARY_NAME,
};
use distlock_tests::RedisServer;
use lock_core::LockError;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

async fn flush(conn: &mut redis::aio::MultiplexedConnection) {
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
}

/// Acquire, watchdog renewal, release and a hand-off each work right after `FUNCTION FLUSH`.
#[tokio::test]
async fn every_function_survives_function_flush() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    flush(&mut conn).await;
    let guard = locks.lock("flushed").await.expect("acquire after a flush");
    flush(&mut conn).await;
    // The PTTL falls, then a renewal (every 200 ms) lifts it again: one ran after the flush.
    for (what, above) in [("the lease ran down", false), ("a renewal", true)] {
        wait_until(what, GENEROUS, || {
            let mut conn = conn.clone();
            async move { (pttl(&mut conn, &lock_key("flushed")).await > 500) == above }
        })
        .await;
    }
    assert!(guard.is_held());
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("flushed").wait(GENEROUS).await }
    });
    wait_until("the waiter queued", GENEROUS, || async {
        locks.waited_channels() == 1
    })
    .await;
    flush(&mut conn).await;
    guard.release().await.expect("release after a flush");
    let next = waiting.await.unwrap().expect("handed over after a flush");
    flush(&mut conn).await;
    next.release().await.unwrap();
    assert!(!exists(&mut conn, &lock_key("flushed")).await);
}

/// The library is loaded once, by the first call that misses it, and never asked about on
/// the hot path; a server restarted without its data gets it once more.
#[tokio::test]
async fn the_library_is_loaded_once_per_server_life() {
    let mut server = RedisServer::start();
    let locks = client(&server.url());
    for _ in 0..3 {
        locks.lock("once").await.unwrap().release().await.unwrap();
    }
    let mut conn = server.conn().await;
    assert_eq!(
        library_loads(&mut conn).await,
        1,
        "one load for the first call"
    );
    let (calls, stats) = command_calls(&mut conn).await;
    assert_eq!(
        calls.get("fcall"),
        Some(&7),
        "one FCALL per call, one retried: {stats}"
    );
    assert!(!calls.contains_key("function|list"), "{stats}");
    // The test servers keep no data: after a restart the library is gone.
    server.restart();
    let mut conn = server.conn().await;
    wait_until("the client reconnected", GENEROUS, || async {
        locks
            .lock("once")
            .try_acquire()
            .await
            .is_ok_and(|g| g.is_some())
    })
    .await;
    // Calls that meet the library missing together share one load; a load cut off by its
    // timeout on a busy machine (done in Redis, not seen by the client) counts twice.
    let loads = library_loads(&mut conn).await;
    assert!((1..=2).contains(&loads), "{loads} loads after the restart");
}

/// Calls in flight together on a fresh server each meet the library missing: they share one
/// load (without that, 1,024 waiters sent 258 loads of the whole library).
#[tokio::test]
async fn calls_that_meet_the_library_missing_together_share_one_load() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let takes = (0..64).map(|n| {
        let locks = locks.clone();
        tokio::spawn(async move { locks.lock(format!("first_{n}")).await })
    });
    let guards: Vec<_> = futures_util::future::join_all(takes).await;
    for guard in guards {
        guard.unwrap().expect("acquired").release().await.unwrap();
    }
    let mut conn = server.conn().await;
    assert_eq!(
        library_loads(&mut conn).await,
        1,
        "one load for 64 first calls"
    );
}

/// Function names are global on a server: the library's name and its functions' carry its
/// version, so an older client's library (here: this one renamed to version 0) and this
/// client's run side by side, on the same locks.
#[tokio::test]
async fn two_versions_of_the_library_run_side_by_side() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    // The library's text as lock-core loads it (one call loads it).
    client(&server.url()).inspect("loads").await.unwrap();
    let library = library_code(&mut conn).await;
    let older = library
        .replacen(
            &format!("#!lua name={LIBRARY_NAME}\n"),
            "#!lua name=distlock_0\n",
            1,
        )
        .replacen(
            &format!("local PREFIX = '{LIBRARY_NAME}_'"),
            "local PREFIX = 'distlock_0_'",
            1,
        );
    assert_eq!(
        older.matches("distlock_0").count(),
        2,
        "the version is where the test looks for it"
    );
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&older)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(name, "distlock_0");
    let locks = client(&server.url());
    let guard = locks.lock("shared").await.unwrap();
    // The older library sees this client's hold, and takes a free lock beside it.
    let key = lock_key("shared");
    let queue = format!("distlock__wait:{{{key}}}");
    let acquire = |name: &str| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("distlock_0_acquire").arg(2).arg(lock_key(name));
        cmd.arg(format!("distlock__wait:{{{}}}", lock_key(name)));
        cmd.arg(30_000).arg("older:1").arg("").arg(0).arg("publish");
        cmd
    };
    let busy: Vec<redis::Value> = acquire("shared").query_async(&mut conn).await.unwrap();
    assert_eq!(
        busy[0],
        redis::Value::Int(0),
        "busy under the newer client's hold"
    );
    let taken: Vec<redis::Value> = acquire("other").query_async(&mut conn).await.unwrap();
    assert_eq!(taken[0], redis::Value::Int(1));
    assert!(
        locks.lock("other").try_acquire().await.unwrap().is_none(),
        "the older hold counts"
    );
    guard.release().await.unwrap();
    assert!(!exists(&mut conn, &key).await && !exists(&mut conn, &queue).await);
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(libraries.len(), 2, "both versions loaded");
}

/// A stand-in for a server before Redis 7.0: it knows no `FCALL` and says it is 6.2.14.
/// Answers `PING`, `INFO`, `WAIT` (no replica: what a client at default settings asks
/// first) and, with an error, everything else.
async fn redis_6_2() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                while let Some(command) = read_command(&mut read).await {
                    let reply = match command.first().map(|c| c.to_ascii_uppercase()).as_deref() {
                        Some("PING") => "+PONG\r\n".to_owned(),
                        Some("WAIT") => ":0\r\n".to_owned(),
                        Some("INFO") => {
                            let info = "# Server\r\nredis_version:6.2.14\r\n";
                            format!("${}\r\n{info}\r\n", info.len())
                        }
                        Some(name) => {
                            format!("-ERR unknown command `{name}`, with args beginning with: \r\n")
                        }
                        None => break,
                    };
                    if write.write_all(reply.as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// One RESP command (an array of bulk strings), or `None` at the end of the stream.
async fn read_command(read: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Option<Vec<String>> {
    let mut line = String::new();
    read.read_line(&mut line).await.ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut words = Vec::with_capacity(count);
    for _ in 0..count {
        line.clear();
        read.read_line(&mut line).await.ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut word = vec![0; len + 2];
        read.read_exact(&mut word).await.ok()?;
        word.truncate(len);
        words.push(String::from_utf8_lossy(&word).into_owned());
    }
    Some(words)
}

/// On a server without Redis Functions the first call fails with a typed error naming the
/// server's version and the minimum, and the operator's load says the same.
#[tokio::test]
async fn a_server_before_redis_7_gets_a_typed_error() {
    let addr = redis_6_2().await;
    let locks = builder(&format!("redis://{addr}")).build().unwrap();
    let error = locks.lock("old").wait(GENEROUS).await.unwrap_err();
    assert!(
        matches!(&error, LockError::ServerTooOld { version, .. } if version == "6.2.14"),
        "{error:?}"
    );
    assert!(error.is_refused() && !error.is_unavailable());
    let text = error.to_string();
    assert!(
        text.contains("6.2.14") && text.contains("Redis 7.0+"),
        "{text}"
    );
    let loaded = locks.load_functions().await.unwrap_err();
    assert!(
        matches!(loaded, LockError::ServerTooOld { .. }),
        "{loaded:?}"
    );
}
