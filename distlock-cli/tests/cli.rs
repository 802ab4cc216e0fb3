//! The `distlock` binary end to end: spawned against a private redis-server (the workspace's
//! launcher, a path-only dev-dependency that `cargo package` leaves out), output parsed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lock_core::{LockClient, LockGuard};
use lock_testkit::{free_port, ClosedPort, RedisServer};
use serde_json::Value;

const GENEROUS: Duration = Duration::from_secs(10);

fn client(redis: &RedisServer) -> LockClient {
    LockClient::builder(redis.url())
        .service_name("billing")
        .holder_host("web-3")
        .lease(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Runs `distlock --url <redis> <args>` to completion.
async fn distlock(redis: &RedisServer, args: &[&str]) -> Output {
    run(&[&["--url", &redis.url()], args].concat()).await
}

/// Runs `distlock <args>` to completion (in a blocking thread), without `$REDIS_URL`.
async fn run(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command.env_remove("REDIS_URL").args(args);
    tokio::task::spawn_blocking(move || command.output().expect("distlock runs"))
        .await
        .unwrap()
}

/// Runs `distlock --json <args>` and parses its standard output, asserting success.
async fn run_json(args: &[&str]) -> Value {
    let out = run(&[&["--json"], args].concat()).await;
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// Runs `distlock --url <redis> --json <args>` and parses its output, asserting success.
async fn distlock_json(redis: &RedisServer, args: &[&str]) -> Value {
    run_json(&[&["--url", &redis.url()], args].concat()).await
}

async fn hold(client: &LockClient, name: &str) -> LockGuard {
    client.lock(name).request_id("req-1").await.unwrap()
}

/// The holder's record reaches another process: service, host, pid, request id, token.
#[tokio::test]
async fn inspect_shows_who_holds_the_lock() {
    let redis = RedisServer::start();
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
    let redis = RedisServer::start();
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
    let redis = RedisServer::start();
    let locks = client(&redis);
    let guard = hold(&locks, "stuck").await;
    let refused = distlock(&redis, &["release", "stuck"]).await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    let out = distlock_json(&redis, &["release", "--force", "stuck"]).await;
    assert_eq!(out["released"], true);
    assert_eq!(out["was"]["holder"]["service"], "billing");
    // How many former holders' clients heard it (the guard below learns either way).
    assert!(out["told"].is_u64(), "{out}");
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
    let redis = RedisServer::start();
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

/// An unreachable Redis is an error on stderr naming the server (not a lock, not the
/// password) and a failing exit status, not a hang; for every subcommand.
#[tokio::test]
async fn unreachable_redis_fails_cleanly() {
    let closed = ClosedPort::bind();
    let port = closed.port();
    let url = format!("redis://ops:s3cret@127.0.0.1:{port}");
    let expected = format!("cannot reach Redis at redis://127.0.0.1:{port} (connection refused)");
    let commands: [&[&str]; 4] = [
        &["list"],
        &["inspect", "item_7"],
        &["release", "--force", "item_7"],
        &["watch", "--count", "1"],
    ];
    for command in commands {
        let output = run(&[&["--url", url.as_str()], command].concat()).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command:?}: {output:?}");
        assert!(stderr.starts_with("error: "), "{command:?}: {stderr}");
        assert!(stderr.contains(&expected), "{command:?}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{command:?}: {stderr}");
    }
}

/// `watch` outlives a failed refresh: it reports the error on stderr and shows the locks
/// once Redis answers again.
#[tokio::test]
async fn watch_reports_a_failed_refresh_and_retries() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let mut watch = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env_remove("REDIS_URL")
        .args(["--url", &url, "--json", "watch", "--interval", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("distlock runs");
    let mut stderr = BufReader::new(watch.stderr.take().unwrap());
    let stdout = BufReader::new(watch.stdout.take().unwrap());
    let first_error = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stderr.read_line(&mut line).map(|_| line)
    });
    let first_error = tokio::time::timeout(GENEROUS, first_error)
        .await
        .expect("a refresh fails while nothing listens")
        .unwrap()
        .unwrap();
    assert!(
        first_error.starts_with("error: refresh failed: "),
        "{first_error}"
    );
    let redis = RedisServer::builder().port(port).start();
    let _guard = hold(&client(&redis), "back").await;
    let frame = tokio::task::spawn_blocking(move || {
        stdout
            .lines()
            .map_while(Result::ok)
            .find(|line| line.contains("\"back\""))
    });
    let frame = tokio::time::timeout(GENEROUS, frame).await;
    let _ = watch.kill();
    let _ = watch.wait();
    let frame: Value = serde_json::from_str(&frame.unwrap().unwrap().unwrap()).unwrap();
    assert_eq!(frame["locks"][0]["holder"]["service"], "billing");
}

/// With `--count`, failed refreshes count too, and a failed last one fails the command.
#[tokio::test]
async fn watch_with_count_stops_after_failed_refreshes() {
    let closed = ClosedPort::bind();
    let url = format!("redis://127.0.0.1:{}", closed.port());
    let out = run(&["--url", &url, "watch", "--interval", "50", "--count", "3"]).await;
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let failures = stderr.matches("error: refresh failed: ").count();
    assert_eq!(failures, 3, "{stderr}");
}

/// `--cluster` reads `--url` as seed nodes: here a one-node Cluster serving every slot.
#[tokio::test]
async fn cluster_flag_lists_and_inspects_cluster_locks() {
    // A one-node cluster announces no endpoint in CLUSTER SLOTS: `list` routes SCAN by slot.
    let node = RedisServer::builder().cluster_node().start();
    node.command::<()>(redis::cmd("CLUSTER").arg(&["ADDSLOTSRANGE", "0", "16383"]));
    let deadline = Instant::now() + GENEROUS;
    while !node
        .command::<String>(redis::cmd("CLUSTER").arg("INFO"))
        .contains("cluster_state:ok")
    {
        assert!(Instant::now() < deadline, "the cluster did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let locks = LockClient::cluster([node.url()])
        .service_name("billing")
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = hold(&locks, "slot_a").await;
    let _other = hold(&locks, "slot_b").await;
    let seed = node.url();
    let cluster = ["--cluster", "--url", &seed];
    let listed = run_json(&[&cluster[..], &["list", "slot_"]].concat()).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["slot_a", "slot_b"]);
    let state = run_json(&[&cluster[..], &["inspect", "slot_a"]].concat()).await;
    assert_eq!(state["fencing_token"], guard.fencing_token());
    assert_eq!(state["holder"]["service"], "billing");
}

/// `--redlock` reads `--url` as the independent masters and reports the majority's view
/// (its token is the highest of all nodes' counters, so at least the guard's).
#[tokio::test]
async fn redlock_flag_inspects_a_majority_lock() {
    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let urls = nodes.each_ref().map(RedisServer::url);
    let locks = LockClient::redlock(urls.clone())
        .service_name("billing")
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = hold(&locks, "quorum").await;
    let mut args = vec!["--redlock"];
    for url in &urls {
        args.extend(["--url", url]);
    }
    let state = run_json(&[&args[..], &["inspect", "quorum"]].concat()).await;
    assert_eq!(state["held"], true, "{state}");
    assert!(state["fencing_token"].as_u64().unwrap() >= guard.fencing_token());
    assert_eq!(state["holder"]["service"], "billing");
    assert_eq!(state["holder"]["pid"], std::process::id());
}

/// `--sentinel <service>` reads `--url` as Sentinels and inspects the master they name.
#[tokio::test]
async fn sentinel_flag_finds_the_master() {
    let master = RedisServer::start();
    let config = format!("sentinel monitor primary 127.0.0.1 {} 1\n", master.port());
    let sentinel = RedisServer::builder()
        .config(config)
        .arg("--sentinel")
        .start();
    let locks = LockClient::sentinel([sentinel.url()], "primary")
        .service_name("billing")
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = hold(&locks, "followed").await;
    let sentinels = ["--sentinel", "primary", "--url", &sentinel.url()];
    let state = run_json(&[&sentinels[..], &["inspect", "followed"]].concat()).await;
    assert_eq!(state["held"], true, "{state}");
    assert_eq!(state["fencing_token"], guard.fencing_token());
    let direct = distlock_json(&master, &["inspect", "followed"]).await;
    assert_eq!(direct["owner"], state["owner"]);
}

/// A URL with ACL credentials is taken whole: a comma in the password splits nothing.
#[tokio::test]
async fn auth_url_with_a_comma_in_the_password() {
    let redis = RedisServer::start();
    let mut ops = redis::cmd("ACL");
    ops.arg(&["SETUSER", "ops", "on", ">pa,ss", "~*", "&*", "+@all"]);
    redis.command::<()>(&ops);
    let auth_url = format!("redis://ops:pa,ss@127.0.0.1:{}", redis.port());
    let locks = LockClient::builder(&auth_url)
        .service_name("billing")
        .build()
        .unwrap();
    let guard = hold(&locks, "secret").await;
    redis.command::<()>(redis::cmd("ACL").arg(&["SETUSER", "default", "off"]));
    let anonymous = distlock(&redis, &["list"]).await;
    assert!(!anonymous.status.success(), "{anonymous:?}");
    let state = run_json(&["--url", &auth_url, "inspect", "secret"]).await;
    assert_eq!(state["fencing_token"], guard.fencing_token());
}

/// Topology flags exclude each other; several URLs need one; an unreadable CA is named.
#[tokio::test]
async fn connection_flags_are_checked_before_connecting() {
    let usage = |out: &Output, needle: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(needle), "{out:?}");
    };
    let both = run(&["--cluster", "--redlock", "list"]).await;
    usage(&both, "cannot be used with");
    let sentinel_redlock = run(&["--redlock", "--sentinel", "m", "list"]).await;
    usage(&sentinel_redlock, "cannot be used with");
    let urls = [
        "--url",
        "redis://127.0.0.1:1",
        "--url",
        "redis://127.0.0.1:2",
    ];
    let several = run(&[&urls[..], &["list"]].concat()).await;
    usage(
        &several,
        "several --url values need --cluster, --redlock or --sentinel",
    );
    let missing = "/nonexistent/ca.pem";
    let ca = run(&["--tls-ca", missing, "list"]).await;
    usage(&ca, &format!("cannot read --tls-ca {missing}"));
}

/// Read-write locks and semaphores show their holders: the readers or the writer, each
/// permit's holder; `list` counts them; `release --force` frees them for their waiters.
#[tokio::test]
async fn the_lock_family_shows_every_holder() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let readers = [
        locks.read_lock("catalog").await.unwrap(),
        locks.read_lock("catalog").await.unwrap(),
    ];
    let permit = locks.semaphore("exports", 3).await.unwrap();
    let state = distlock_json(&redis, &["inspect", "catalog"]).await;
    assert_eq!(state["held"], true);
    assert_eq!(state["mode"], "read");
    let holders = state["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 2);
    let tokens: Vec<u64> = holders
        .iter()
        .map(|h| h["fencing_token"].as_u64().unwrap())
        .collect();
    for reader in &readers {
        assert!(tokens.contains(&reader.fencing_token()), "{state}");
    }
    assert_eq!(holders[0]["holder"]["service"], "billing");
    assert!(holders[0]["ttl_ms"].as_u64().unwrap() > 0);
    let state = distlock_json(&redis, &["inspect", "exports"]).await;
    assert_eq!(state["mode"], "permit");
    assert_eq!(state["holders"][0]["fencing_token"], permit.fencing_token());
    let table = String::from_utf8(distlock(&redis, &["list"]).await.stdout).unwrap();
    assert!(table.contains("2 readers"), "{table}");
    assert!(table.contains("exports"), "{table}");
    let text = String::from_utf8(distlock(&redis, &["inspect", "catalog"]).await.stdout).unwrap();
    assert!(text.contains("held by   2 readers"), "{text}");

    let writer = tokio::spawn({
        let locks = locks.clone();
        async move { locks.write_lock("catalog").wait(GENEROUS).await }
    });
    let started = Instant::now();
    while distlock_json(&redis, &["inspect", "catalog"]).await["waiters"] != 1 {
        assert!(started.elapsed() < GENEROUS, "the writer never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = distlock(&redis, &["release", "--force", "catalog"]).await;
    assert!(out.status.success(), "{out:?}");
    let writer = writer.await.unwrap().expect("woken by the forced release");
    assert_eq!(writer.mode(), lock_core::LockMode::Write);
    let state = distlock_json(&redis, &["inspect", "catalog"]).await;
    assert_eq!(
        (
            state["mode"].as_str(),
            state["holders"].as_array().unwrap().len()
        ),
        (Some("write"), 1)
    );
    writer.release().await.unwrap();
    let out = distlock(&redis, &["release", "--force", "exports"]).await;
    assert!(out.status.success(), "{out:?}");
    let state = distlock_json(&redis, &["inspect", "exports"]).await;
    assert_eq!(state["held"], false);
    drop((readers, permit));
}

/// `functions load` puts the library on the server for users who may not load it, and a
/// user without `FUNCTION LOAD` is told what went wrong.
#[tokio::test]
async fn functions_load_preloads_the_library() {
    let redis = RedisServer::start();
    let loaded = distlock_json(&redis, &["functions", "load"]).await;
    let library = loaded["loaded"]
        .as_str()
        .expect("the library's name")
        .to_owned();
    assert!(library.starts_with("distlock_"), "{loaded}");
    let mut conn = redis.conn().await;
    let listed: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(&library)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{library} is loaded");
    // Again: replaced, not refused.
    let out = distlock(&redis, &["functions", "load"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("loaded {library}\n")
    );
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-function")
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = format!("redis://app:pw@127.0.0.1:{}", redis.port());
    let out = run(&["--url", &url, "functions", "load"]).await;
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("may not load it"), "{stderr}");
    assert!(
        !stderr.contains(":pw@"),
        "no password in the output: {stderr}"
    );
}
