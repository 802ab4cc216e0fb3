//! Tests for [`super::RedisServer`]: each starts real servers and proves a control works.

use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use redis::AsyncCommands;
use rustix::io::Errno;
use rustix::process::{test_kill_process, Pid};

use super::*;
use crate::process::Proc;
use crate::testutil::{conn_without_timeouts, ping, soon};

async fn config_get(server: &RedisServer, key: &str) -> String {
    let mut conn = server.conn().await;
    let (_, value): (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    value
}

#[test]
fn binary_is_available() {
    assert!(redis_server_available(), "{}", crate::error::INSTALL_HINT);
}

#[tokio::test]
async fn starts_private_server_on_loopback_without_persistence() {
    let server = RedisServer::start();
    assert_ne!(server.port(), 6379);
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    assert_eq!(
        server.addr().to_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert_eq!(ping(&mut server.conn().await).await.unwrap(), "PONG");
    assert_eq!(config_get(&server, "save").await, "");
    assert_eq!(config_get(&server, "appendonly").await, "no");
    assert_eq!(
        config_get(&server, "dir").await,
        server.dir().canonicalize().unwrap().display().to_string()
    );
}

#[tokio::test]
async fn builder_passes_extra_args() {
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("1mb")
        .args(["--hz", "20"])
        .start();
    assert_eq!(config_get(&server, "maxmemory").await, "1048576");
    assert_eq!(config_get(&server, "hz").await, "20");
}

#[tokio::test]
async fn server_with_password_starts_and_requires_auth() {
    let server = RedisServer::builder()
        .args(["--requirepass", "s3cret"])
        .start();
    let url = format!("redis://:s3cret@127.0.0.1:{}", server.port());
    assert_eq!(
        ping(&mut conn_without_timeouts(&url).await.unwrap())
            .await
            .unwrap(),
        "PONG"
    );
    let unauthenticated = conn_without_timeouts(&server.url()).await;
    let err = match unauthenticated {
        Ok(mut conn) => ping(&mut conn).await.unwrap_err(),
        Err(e) => e,
    };
    assert!(err.to_string().contains("NOAUTH"), "{err}");
}

#[tokio::test]
async fn pause_blocks_replies_until_resume() {
    let server = RedisServer::start();
    let mut conn = conn_without_timeouts(&server.url()).await.unwrap();
    server.pause();
    let paused = tokio::time::timeout(Duration::from_millis(500), ping(&mut conn)).await;
    assert!(paused.is_err(), "a paused server answered: {paused:?}");
    server.resume();
    assert_eq!(
        soon("ping after resume", ping(&mut conn)).await.unwrap(),
        "PONG"
    );
}

#[tokio::test]
async fn stop_breaks_connections_and_restart_keeps_port_with_empty_data() {
    let mut server = RedisServer::start();
    let port = server.port();
    let mut conn = server.conn().await;
    let () = conn.set("key", "value").await.unwrap();

    server.stop();
    assert!(!server.is_running() && server.pid().is_none());
    soon("ping after stop", ping(&mut conn)).await.unwrap_err();
    soon("connect after stop", conn_without_timeouts(&server.url()))
        .await
        .unwrap_err();

    server.restart();
    assert_eq!(server.port(), port);
    let value: Option<String> = server.conn().await.get("key").await.unwrap();
    assert_eq!(value, None, "restart must come up empty");
}

#[tokio::test]
async fn kill_crashes_server_and_restart_recovers() {
    let mut server = RedisServer::start();
    let mut conn = server.conn().await;
    server.kill();
    soon("ping after kill", ping(&mut conn)).await.unwrap_err();
    server.kill(); // no-op when already dead
    server.restart();
    assert_eq!(ping(&mut server.conn().await).await.unwrap(), "PONG");
}

#[tokio::test]
async fn stop_ends_a_paused_server() {
    let mut server = RedisServer::start();
    server.pause();
    server.stop(); // must not hang on the SIGSTOPped process
    assert!(!server.is_running());
}

#[test]
#[should_panic(expected = "is not running")]
fn pause_after_kill_panics() {
    let mut server = RedisServer::start();
    server.kill();
    server.pause();
}

#[test]
fn drop_kills_process_and_removes_dir_even_on_panic() {
    let mut seen = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let server = RedisServer::start();
        seen = Some((
            server.pid().unwrap(),
            server.dir().to_path_buf(),
            server.addr(),
        ));
        panic!("test failure while a server is alive");
    }));
    assert!(result.is_err());
    let (pid, dir, addr) = seen.unwrap();
    assert!(!dir.exists(), "{} still exists", dir.display());
    // Drop reaped the child, so the pid no longer exists.
    assert_eq!(
        test_kill_process(Pid::from_raw(pid as i32).expect("a child's pid is positive")),
        Err(Errno::SRCH)
    );
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn concurrent_servers_get_distinct_ports() {
    let servers: Vec<RedisServer> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(RedisServer::start)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 4);
}

#[test]
fn port_collision_is_reported_as_retryable() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let args = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
    ]
    .map(String::from);
    match Proc::spawn(&server_bin(), &args, port, START_TIMEOUT) {
        Err(SpawnError::AddrInUse(_)) => {}
        Err(SpawnError::Fatal(msg)) => panic!("expected AddrInUse, got Fatal: {msg}"),
        Err(SpawnError::CannotRun(e)) => panic!("expected AddrInUse, got CannotRun: {e}"),
        Ok(_) => panic!("redis-server started on a taken port"),
    }
}

/// A binary that does not exist is the typed "not installed" error, naming it and how to
/// install one.
#[tokio::test]
async fn missing_binary_explains_how_to_install() {
    let err = RedisServer::builder()
        .bin("/nonexistent/redis-server")
        .try_start()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StartError::NotInstalled { bin } if bin == "/nonexistent/redis-server"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("apt-get install redis-server"), "{msg}");
}

#[tokio::test]
async fn config_file_and_given_port() {
    let port = crate::free_port();
    let mut server = RedisServer::builder()
        .config("maxmemory 2mb\nhz 15\n")
        .arg("--hz")
        .arg("25")
        .port(port)
        .start();
    assert_eq!(server.port(), port);
    assert_eq!(config_get(&server, "maxmemory").await, "2097152");
    assert_eq!(
        config_get(&server, "hz").await,
        "25",
        "arguments override the file"
    );
    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(config_get(&server, "maxmemory").await, "2097152");
}

#[test]
fn command_runs_without_a_runtime() {
    let server = RedisServer::start();
    server.command::<()>(redis::cmd("SET").arg("k").arg("v"));
    assert_eq!(server.command::<String>(redis::cmd("GET").arg("k")), "v");
}

#[test]
fn a_sentinel_starts_from_its_config_file() {
    let master = RedisServer::start();
    let config = format!("sentinel monitor primary 127.0.0.1 {} 1\n", master.port());
    let sentinel = RedisServer::builder()
        .config(config)
        .arg("--sentinel")
        .start();
    let master_addr: Vec<String> = sentinel.command(
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg("primary"),
    );
    assert_eq!(master_addr, ["127.0.0.1", &master.port().to_string()]);
}

#[tokio::test]
async fn try_start_reports_a_server_that_exits() {
    let err = RedisServer::builder()
        .args(["--no-such-option", "1"])
        .try_start()
        .await
        .unwrap_err();
    assert!(!err.is_not_installed());
    assert!(err.to_string().contains("exited during startup"), "{err}");
    // The same on the calling thread.
    let err = RedisServer::builder()
        .args(["--no-such-option", "1"])
        .try_start_blocking()
        .unwrap_err();
    assert!(err.to_string().contains("exited during startup"), "{err}");
}

/// The async start answers a running server, the default settings' too.
#[tokio::test]
async fn try_start_awaits_a_running_server() {
    let server = RedisServer::try_start().await.unwrap();
    assert!(server.is_running());
    assert_eq!(ping(&mut server.conn().await).await.unwrap(), "PONG");
}
