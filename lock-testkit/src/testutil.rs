//! Helpers for unit tests of this crate and of the tests crate (not part of the launcher's
//! API).

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};

/// Generous bound for anything that should happen "soon" on a loaded machine.
pub const SOON: Duration = Duration::from_secs(10);

/// A connection without the redis crate's own timeouts, so tests measure
/// hangs with `tokio::time::timeout` instead.
pub async fn conn_without_timeouts(url: &str) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// `PING` on `conn`.
pub async fn ping(conn: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

/// Awaits `fut`, failing the test if it takes longer than [`SOON`].
pub async fn soon<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(SOON, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {SOON:?}"))
}
