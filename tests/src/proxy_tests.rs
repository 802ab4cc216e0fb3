//! Tests for [`super::TcpProxy`] against a real `redis-server`.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, RedisResult};

use super::*;
use crate::server::RedisServer;
use crate::testutil::{conn_without_timeouts, ping, soon};

/// Short bound for "this hangs": only ever asserted as "did not finish".
const HANG: Duration = Duration::from_millis(500);

fn server_and_proxy() -> (RedisServer, TcpProxy) {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    (server, proxy)
}

async fn connect(proxy: &TcpProxy) -> MultiplexedConnection {
    soon("connect through proxy", conn_without_timeouts(&proxy.url()))
        .await
        .unwrap()
}

/// Connects and pings on a fresh connection (setup may or may not send commands).
async fn fresh_ping(url: &str) -> RedisResult<String> {
    ping(&mut conn_without_timeouts(url).await?).await
}

/// Polls (bounded: 1000 × 10 ms) until the proxy has `n` open connections.
async fn wait_for_connections(proxy: &TcpProxy, n: usize) {
    for _ in 0..1000 {
        if proxy.connection_count() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "proxy has {} connections, want {n}",
        proxy.connection_count()
    );
}

#[tokio::test]
async fn forwards_commands_and_counts_connections() {
    let (server, proxy) = server_and_proxy();
    assert_eq!(proxy.target(), server.addr());
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}", proxy.addr().port())
    );
    let mut conn = connect(&proxy).await;
    let () = conn.set("key", "via-proxy").await.unwrap();
    let direct: String = server.conn().await.get("key").await.unwrap();
    assert_eq!(direct, "via-proxy");
    assert_eq!(proxy.connection_count(), 1);
    drop(conn);
    wait_for_connections(&proxy, 0).await;
}

#[tokio::test]
async fn latency_delays_each_direction() {
    let (_server, proxy) = server_and_proxy();
    let mut conn = connect(&proxy).await;
    let latency = Duration::from_millis(150);
    proxy.set_latency(latency);
    let started = Instant::now();
    soon("ping with latency", ping(&mut conn)).await.unwrap();
    // Timers never fire early, so this bound can't flake (no upper bound asserted).
    assert!(
        started.elapsed() >= 2 * latency,
        "round trip took only {:?}",
        started.elapsed()
    );
    proxy.set_latency(Duration::ZERO);
    soon("ping without latency", ping(&mut conn)).await.unwrap();
}

#[tokio::test]
async fn blackhole_hangs_clients_and_lifting_it_delivers_held_traffic() {
    let (_server, proxy) = server_and_proxy();
    let mut conn = connect(&proxy).await;
    proxy.blackhole(true);
    assert!(
        tokio::time::timeout(HANG, ping(&mut conn)).await.is_err(),
        "reply crossed the blackhole"
    );
    assert!(
        tokio::time::timeout(HANG, fresh_ping(&proxy.url()))
            .await
            .is_err(),
        "new connection got through"
    );
    proxy.blackhole(false);
    assert_eq!(
        soon("ping after blackhole", ping(&mut conn)).await.unwrap(),
        "PONG"
    );
    assert_eq!(
        soon("fresh ping after blackhole", fresh_ping(&proxy.url()))
            .await
            .unwrap(),
        "PONG"
    );
}

#[tokio::test]
async fn cut_all_breaks_live_connections_but_not_new_ones() {
    let (_server, proxy) = server_and_proxy();
    let mut conn = connect(&proxy).await;
    ping(&mut conn).await.unwrap();
    proxy.cut_all();
    assert_eq!(proxy.connection_count(), 0);
    soon("ping after cut", ping(&mut conn)).await.unwrap_err();
    assert_eq!(
        soon("ping on new connection", fresh_ping(&proxy.url()))
            .await
            .unwrap(),
        "PONG"
    );
}

#[tokio::test]
async fn refuse_closes_new_connections_only() {
    let (_server, proxy) = server_and_proxy();
    let mut conn = connect(&proxy).await;
    proxy.refuse(true);
    soon("connect while refusing", fresh_ping(&proxy.url()))
        .await
        .unwrap_err();
    assert_eq!(
        ping(&mut conn).await.unwrap(),
        "PONG",
        "existing connection must survive"
    );
    proxy.refuse(false);
    assert_eq!(
        soon("connect after refusing", fresh_ping(&proxy.url()))
            .await
            .unwrap(),
        "PONG"
    );
}

#[tokio::test]
async fn drop_next_reply_loses_the_reply_of_a_command_that_ran() {
    let (server, proxy) = server_and_proxy();
    let mut conn = connect(&proxy).await;
    assert_eq!(proxy.dropped_replies(), 0);
    proxy.drop_next_reply();
    let lost: RedisResult<i64> = soon("INCR with lost reply", conn.incr("counter", 1)).await;
    assert!(lost.is_err(), "reply was not dropped: {lost:?}");
    assert_eq!(proxy.dropped_replies(), 1);
    let counter: i64 = server.conn().await.get("counter").await.unwrap();
    assert_eq!(counter, 1, "the command must have run on Redis");
    wait_for_connections(&proxy, 0).await;
    // One-shot: the next connection gets its replies.
    assert_eq!(
        soon("ping after lost reply", fresh_ping(&proxy.url()))
            .await
            .unwrap(),
        "PONG"
    );
    assert_eq!(proxy.dropped_replies(), 1, "one-shot");
}

#[tokio::test]
async fn unreachable_target_closes_client_connections() {
    let (mut server, proxy) = server_and_proxy();
    server.kill();
    soon("connect to dead target", fresh_ping(&proxy.url()))
        .await
        .unwrap_err();
    server.restart(); // same port, so the proxy reaches it again
    assert_eq!(
        soon("connect after restart", fresh_ping(&proxy.url()))
            .await
            .unwrap(),
        "PONG"
    );
}

#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let (_server, proxy) = server_and_proxy();
    let addr = proxy.addr();
    let mut conn = connect(&proxy).await;
    drop(proxy);
    soon("ping after proxy drop", ping(&mut conn))
        .await
        .unwrap_err();
    // The listener closes once the runtime drops the aborted accept task.
    for _ in 0..1000 {
        if soon("connect", tokio::net::TcpStream::connect(addr))
            .await
            .is_err()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("proxy listener still accepts after drop");
}
