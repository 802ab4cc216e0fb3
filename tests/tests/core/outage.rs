//! Redis unreachable: a typed error within the configured bound, never a hang.

use std::future::IntoFuture;
use std::time::Duration;

use distlock_tests::locks::{builder, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use futures_util::future::join_all;
use lock_core::{LockClient, LockError};
use tokio::time::Instant;

const COMMAND_TIMEOUT: Duration = Duration::from_secs(1);
const WAIT: Duration = Duration::from_millis(500);

async fn assert_unavailable_within_bound(url: &str) {
    let locks = builder(url)
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap();
    let started = Instant::now();
    let err = locks.lock("down").wait(WAIT).await.unwrap_err();
    let took = started.elapsed();
    assert!(err.is_unavailable(), "expected unavailable, got {err}");
    assert!(!err.is_wait_timeout());
    assert!(err.to_string().contains("`down`"), "{err}");
    // wait + command timeout, plus slack for a loaded machine.
    assert!(
        took < WAIT + COMMAND_TIMEOUT + Duration::from_secs(2),
        "took {took:?}"
    );
}

/// Nothing listens on the port.
#[tokio::test]
async fn nothing_listening() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    assert_unavailable_within_bound(&url).await;
}

/// The connection is black-holed: accepted, never answered.
#[tokio::test]
async fn black_holed() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    proxy.blackhole(true);
    assert_unavailable_within_bound(&proxy.url()).await;
}

/// After an outage, the same client works again once Redis is back.
#[tokio::test]
async fn recovers_after_outage() {
    let mut server = RedisServer::start();
    let locks = builder(&server.url())
        .command_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap();
    locks.lock("back").await.unwrap().release().await.unwrap();
    server.kill();
    assert!(locks
        .lock("back")
        .wait(WAIT)
        .await
        .unwrap_err()
        .is_unavailable());
    server.restart();
    lock_once_back(&locks, "back").await;
}

/// Takes `name` until it works, within [`GENEROUS`]: while the client still knows Redis was
/// down, each try is refused at once until one (a probe, one a second) reaches it.
async fn lock_once_back(locks: &LockClient, name: &str) {
    let deadline = Instant::now() + GENEROUS;
    loop {
        match locks.lock(name).await {
            Ok(guard) => return guard.release().await.unwrap(),
            Err(e) => assert!(
                e.is_unavailable() && Instant::now() < deadline,
                "redis did not come back: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Tries `locks` until an acquisition is refused at once (`Unavailable`, no round trip):
/// before, each waits its command timeout in the black hole (`Timeout`). Bounded.
async fn until_refused_at_once(locks: &LockClient) {
    let deadline = Instant::now() + GENEROUS * 3;
    loop {
        match locks.lock("probe").await {
            Err(LockError::Unavailable { .. }) => return,
            Err(LockError::Timeout { .. }) if Instant::now() < deadline => {}
            other => panic!("not refused at once within the bound: {other:?}"),
        }
    }
}

/// Calls that fail for a second with no answer between (a black hole: each waits its command
/// timeout, `Timeout`) make an outage the client knows of: then acquisitions are refused at
/// once. Of 20 sent together at most one goes to Redis as the probe; the others are
/// `Unavailable` without a round trip. Redis back, the next probe sees it and locks work again.
#[tokio::test]
async fn a_known_outage_refuses_at_once_and_a_probe_sees_the_recovery() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    let locks = builder(&proxy.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    lock_once_back(&locks, "fast").await;
    proxy.blackhole(true);
    until_refused_at_once(&locks).await;
    let tries = join_all((0..20).map(|_| locks.lock("fast").into_future())).await;
    let refused = tries
        .iter()
        .filter(|t| matches!(t, Err(LockError::Unavailable { .. })))
        .count();
    assert!(refused >= 19, "refused at once: {refused} of 20: {tries:?}");
    assert!(!locks.is_reachable());
    proxy.blackhole(false);
    lock_once_back(&locks, "fast").await;
    assert!(locks.is_reachable());
}

/// The log lines written on this thread since [`Logs::capture`] (current-thread runtime:
/// every task of the test's client logs on the test's thread).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

thread_local! {
    static CAPTURE: std::cell::RefCell<Option<Logs>> = const { std::cell::RefCell::new(None) };
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where the global subscriber writes: the capture of the thread that logs, else nowhere.
struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|c| match &mut *c.borrow_mut() {
            Some(logs) => logs.write(buf),
            None => Ok(buf.len()),
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's log lines. One global subscriber (installed once) rather than
    /// a thread-scoped one: callsites that parallel tests hit first would not reach a
    /// scoped subscriber reliably.
    fn capture() -> Self {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::INFO)
                .with_writer(|| ThreadWriter)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        });
        let logs = Logs::default();
        CAPTURE.with(|c| *c.borrow_mut() = Some(logs.clone()));
        logs
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn count(&self, text: &str) -> usize {
        self.text().matches(text).count()
    }
}

/// An outage is one `warn` per client, not one per request, and its end one `info`.
#[tokio::test]
async fn an_outage_is_logged_once_and_its_end_once() {
    let logs = Logs::capture();
    let mut server = RedisServer::start();
    let locks = builder(&server.url())
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap();
    locks.lock("up").await.unwrap().release().await.unwrap();
    assert_eq!(logs.count("redis cannot be reached"), 0);
    server.stop();
    for _ in 0..5 {
        let err = locks.lock("up").wait(Duration::ZERO).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
    }
    assert!(!locks.is_reachable());
    assert_eq!(logs.count("redis cannot be reached"), 1);
    server.restart();
    lock_once_back(&locks, "up").await;
    assert!(locks.is_reachable());
    assert_eq!(logs.count("redis is reachable again"), 1, "{}", logs.text());
    assert_eq!(logs.count("redis cannot be reached"), 1, "{}", logs.text());
}

/// No line per request anywhere during an outage, the queue clean-up included: 3 s of
/// requests that would queue (each probe's failed attempt leaves the queue, and that fails
/// too) log one warning in all, the client's.
#[tokio::test]
async fn an_outage_logs_no_line_per_request() {
    let logs = Logs::capture();
    let mut server = RedisServer::start();
    let locks = builder(&server.url())
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap();
    lock_once_back(&locks, "queued").await;
    server.stop();
    let until = Instant::now() + Duration::from_secs(3);
    let mut requests = 0;
    while Instant::now() < until {
        let err = locks.lock("queued").wait(WAIT).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        requests += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.restart();
    // Also lets the clean-ups spawned by the failed attempts finish.
    lock_once_back(&locks, "queued").await;
    let text = logs.text();
    assert_eq!(logs.count("WARN"), 1, "{requests} requests:\n{text}");
    assert_eq!(logs.count("redis cannot be reached"), 1, "{text}");
}
