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
