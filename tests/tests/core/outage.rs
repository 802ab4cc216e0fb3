//! Redis unreachable: a typed error within the configured bound, never a hang.

use std::time::Duration;

use distlock_tests::locks::builder;
use distlock_tests::{RedisServer, TcpProxy};
use tokio::time::Instant;

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
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
    let guard = locks.lock("back").wait(Duration::from_secs(10)).await;
    // The first call after a restart may still see the dead connection; the next succeeds.
    let guard = match guard {
        Ok(g) => g,
        Err(_) => locks
            .lock("back")
            .wait(Duration::from_secs(10))
            .await
            .unwrap(),
    };
    guard.release().await.unwrap();
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
    let deadline = Instant::now() + distlock_tests::locks::GENEROUS;
    while locks.lock("up").await.is_err() {
        assert!(Instant::now() < deadline, "redis did not come back");
    }
    assert!(locks.is_reachable());
    assert_eq!(logs.count("redis is reachable again"), 1, "{}", logs.text());
    assert_eq!(logs.count("redis cannot be reached"), 1, "{}", logs.text());
}
