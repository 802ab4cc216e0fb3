//! The `distlock` binary end to end: spawned against a private redis-server, output parsed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lock_core::{LockClient, LockGuard};
use serde_json::Value;

const GENEROUS: Duration = Duration::from_secs(10);

/// A private redis-server on a free loopback port, killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child =
            Command::new(std::env::var("REDIS_SERVER_BIN").unwrap_or("redis-server".into()))
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server runs (tests/run.sh installs it)");
        let redis = Self { child, port };
        let deadline = Instant::now() + GENEROUS;
        while !redis.pings() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn pings(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let mut reply = [0u8; 7];
        conn.write_all(b"PING\r\n").is_ok()
            && conn.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(redis: &Redis) -> LockClient {
    LockClient::builder(redis.url())
        .service_name("billing")
        .holder_host("web-3")
        .lease(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Runs `distlock --url <redis> <args>` to completion (in a blocking thread).
async fn distlock(redis: &Redis, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env_remove("REDIS_URL")
        .args(["--url", &redis.url()])
        .args(args);
    tokio::task::spawn_blocking(move || command.output().expect("distlock runs"))
        .await
        .unwrap()
}

/// Runs it and parses its standard output as JSON, asserting success.
async fn distlock_json(redis: &Redis, args: &[&str]) -> Value {
    let out = distlock(redis, &[&["--json"], args].concat()).await;
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

async fn hold(client: &LockClient, name: &str) -> LockGuard {
    client.lock(name).request_id("req-1").await.unwrap()
}

/// The holder's record reaches another process: service, host, pid, request id, token.
#[tokio::test]
async fn inspect_shows_who_holds_the_lock() {
    let redis = Redis::start();
    let locks = client(&redis);
    let guard = hold(&locks, "item_7").await;
    let state = distlock_json(&redis, &["inspect", "item_7"]).await;
    assert_eq!(state["held"], true);
    assert_eq!(state["key"], "distlock:item_7");
    assert_eq!(state["fencing_token"], guard.fencing_token());
    assert_eq!(state["hold_count"], 1);
    assert!(state["ttl_ms"].as_u64().unwrap() > 0);
    let holder = &state["holder"];
    assert_eq!(holder["service"], "billing");
    assert_eq!(holder["host"], "web-3");
    assert_eq!(holder["pid"], std::process::id());
    assert_eq!(holder["request_id"], "req-1");
    let text = distlock(&redis, &["inspect", "item_7"]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("held by   billing@web-3 (pid "), "{text}");
    guard.release().await.unwrap();
    let state = distlock_json(&redis, &["inspect", "item_7"]).await;
    assert_eq!(state["held"], false);
    assert!(state["holder"].is_null());
}

/// `list` matches a name prefix; glob characters in it match only themselves.
#[tokio::test]
async fn list_matches_a_literal_name_prefix() {
    let redis = Redis::start();
    let locks = client(&redis);
    let _guards = [
        hold(&locks, "order_1").await,
        hold(&locks, "order_2").await,
        hold(&locks, "order*x").await,
        hold(&locks, "other").await,
    ];
    let names = |list: Value| -> Vec<String> {
        let list = list.as_array().unwrap().iter();
        list.map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = names(distlock_json(&redis, &["list"]).await);
    assert_eq!(all, ["order*x", "order_1", "order_2", "other"]);
    let orders = names(distlock_json(&redis, &["list", "order"]).await);
    assert_eq!(orders, ["order*x", "order_1", "order_2"]);
    let star = names(distlock_json(&redis, &["list", "order*"]).await);
    assert_eq!(star, ["order*x"]);
    let table = distlock(&redis, &["list", "order_"]).await;
    let table = String::from_utf8(table.stdout).unwrap();
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("NAME"), "{table}");
    assert!(lines.next().unwrap().contains("billing@web-3"), "{table}");
    assert_eq!(lines.count(), 1, "{table}");
}

/// `release --force` frees the lock and the old guard learns it lost it; a second release
/// finds nothing; without `--force` nothing happens.
#[tokio::test]
async fn release_force_frees_the_lock_and_the_old_guard_reports_lost() {
    let redis = Redis::start();
    let locks = client(&redis);
    let guard = hold(&locks, "stuck").await;
    let refused = distlock(&redis, &["release", "stuck"]).await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    let out = distlock_json(&redis, &["release", "--force", "stuck"]).await;
    assert_eq!(out["released"], true);
    assert_eq!(out["was"]["holder"]["service"], "billing");
    tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("the old guard reports the lock lost");
    assert!(!guard.is_held());
    let again = distlock_json(&redis, &["release", "--force", "stuck"]).await;
    assert_eq!(again["released"], false);
}

/// `watch --count N` refreshes N times and exits; each frame lists the held locks.
#[tokio::test]
async fn watch_refreshes_and_stops_after_count() {
    let redis = Redis::start();
    let locks = client(&redis);
    let _guard = hold(&locks, "busy").await;
    let args = ["--json", "watch", "--interval", "100", "--count", "3"];
    let out = distlock(&redis, &args).await;
    assert!(out.status.success(), "{out:?}");
    let frames: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 3);
    for frame in &frames {
        assert_eq!(frame["locks"][0]["name"], "busy");
        assert_eq!(frame["locks"][0]["holder"]["service"], "billing");
    }
}

/// An unreachable Redis is an error on stderr and a failing exit status, not a hang.
#[tokio::test]
async fn unreachable_redis_fails_cleanly() {
    let redis = Redis::start();
    let url = redis.url();
    drop(redis);
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_distlock"))
            .args(["--url", &url, "list"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error: "));
}
