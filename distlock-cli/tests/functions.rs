//! `distlock functions list` and `remove`: the library's versions on private redis-servers
//! (one server, a Redlock trio, a three-master Cluster), the refusal to remove the CLI's own
//! version, the operator's ACL rule, and what clients of a removed version do.

use std::process::{Command, Output};
use std::time::Duration;

use lock_core::{LockClient, LockError};
use lock_testkit::{RedisCluster, RedisServer};
use serde_json::Value;

const GENEROUS: Duration = Duration::from_secs(10);

/// An old version of the library, as a release before this one would have loaded it.
const V1: &str = "#!lua name=distlock_1\n\
                  redis.register_function('distlock_1_acquire', function() return 1 end)";

/// Another library the `distlock_*` pattern matches: no version of distlock's.
const OTHER: &str = "#!lua name=distlock_custom\n\
                     redis.register_function('custom_f', function() return 1 end)";

/// The rule the guide gives the operator's user.
const OPERATOR_RULE: [&str; 4] = [
    "-@all",
    "+function|load",
    "+function|list",
    "+function|delete",
];

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

/// `distlock --url <url> <args>`.
async fn on(url: &str, args: &[&str]) -> Output {
    run(&[&["--url", url], args].concat()).await
}

/// `distlock --url <url> --json <args>`, asserting success.
async fn on_json(url: &str, args: &[&str]) -> Value {
    run_json(&[&["--url", url], args].concat()).await
}

/// Loads `library` on `server` by hand, as an older release's client would have.
fn load_by_hand(server: &RedisServer, library: &str) {
    server.command::<String>(redis::cmd("FUNCTION").arg("LOAD").arg(library));
}

/// The libraries a server has, by name, whatever they are.
fn library_names(server: &RedisServer) -> Vec<String> {
    let listed: Vec<std::collections::HashMap<String, redis::Value>> =
        server.command(redis::cmd("FUNCTION").arg("LIST"));
    let mut names: Vec<String> = (listed.into_iter())
        .map(|mut l| redis::from_redis_value(l.remove("library_name").unwrap()).unwrap())
        .collect();
    names.sort();
    names
}

/// `(name, version, functions, current)` of each library of one node of `list --json`.
fn libraries(node: &Value) -> Vec<(String, u64, u64, bool)> {
    (node["libraries"].as_array().unwrap().iter())
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_owned(),
                l["version"].as_u64().unwrap(),
                l["functions"].as_u64().unwrap(),
                l["current"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn current() -> String {
    format!("distlock_{}", LockClient::FUNCTIONS_VERSION)
}

/// `list` shows each version with its functions and marks the CLI's; `remove --older`
/// deletes the old one, keeps the current one and leaves other libraries alone.
#[tokio::test]
async fn list_shows_each_version_and_remove_older_keeps_the_current() {
    let server = RedisServer::start();
    let url = server.url();
    let empty = on_json(&url, &["functions", "list"]).await;
    assert_eq!(empty["current"], current().as_str());
    assert_eq!(libraries(&empty["nodes"][0]), []);
    let text = String::from_utf8(on(&url, &["functions", "list"]).await.stdout).unwrap();
    assert!(text.contains("(none)"), "{text}");

    on_json(&url, &["functions", "load"]).await;
    load_by_hand(&server, V1);
    load_by_hand(&server, OTHER);
    let listed = on_json(&url, &["functions", "list"]).await;
    let nodes = listed["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{listed}");
    assert_eq!(nodes[0]["node"], url.as_str());
    let found = libraries(&nodes[0]);
    assert_eq!(found.len(), 2, "distlock_custom is no version: {listed}");
    assert_eq!(found[0], ("distlock_1".to_owned(), 1, 1, false));
    let (name, version, functions, is_current) = &found[1];
    assert_eq!(
        (name, *version, *is_current),
        (&current(), u64::from(LockClient::FUNCTIONS_VERSION), true)
    );
    assert!(*functions > 1, "{listed}");
    let text = String::from_utf8(on(&url, &["functions", "list"]).await.stdout).unwrap();
    let line = |library: &str| text.lines().find(|l| l.contains(library)).unwrap();
    assert!(line(&current()).ends_with("this CLI's version"), "{text}");
    assert!(!line("distlock_1 ").contains("this CLI"), "{text}");

    let removed = on_json(&url, &["functions", "remove", "--older"]).await;
    let expected = serde_json::json!([{ "library": "distlock_1", "version": 1, "nodes": [url] }]);
    assert_eq!(removed["removed"], expected);
    let listed = on_json(&url, &["functions", "list"]).await;
    let kept: Vec<String> = libraries(&listed["nodes"][0])
        .into_iter()
        .map(|l| l.0)
        .collect();
    assert_eq!(kept, [current()]);
    assert_eq!(
        library_names(&server),
        [current(), "distlock_custom".to_owned()]
    );
    let again = on(&url, &["functions", "remove", "--older"]).await;
    let again = String::from_utf8(again.stdout).unwrap();
    assert_eq!(again, "no older version on any node\n");
}

/// The CLI's own version is refused without `--force`, before anything is removed; with
/// it, the version goes, and a client allowed `FUNCTION LOAD` loads it again at its next
/// call.
#[tokio::test]
async fn removing_the_current_version_needs_force_and_its_clients_load_it_again() {
    let server = RedisServer::start();
    let url = server.url();
    on_json(&url, &["functions", "load"]).await;
    load_by_hand(&server, V1);
    let version = LockClient::FUNCTIONS_VERSION.to_string();
    let both = [
        "functions",
        "remove",
        "--version",
        "1",
        "--version",
        &version,
    ];
    let refused = on(&url, &both).await;
    assert!(!refused.status.success(), "{refused:?}");
    assert!(stderr(&refused).contains("--force"), "{refused:?}");
    assert_eq!(library_names(&server), ["distlock_1".to_owned(), current()]);

    let forced = on_json(&url, &[&both[..], &["--force"]].concat()).await;
    assert_eq!(forced["removed"][1]["nodes"][0], url.as_str(), "{forced}");
    assert_eq!(library_names(&server), Vec::<String>::new());
    let locks = LockClient::builder(&url).build().unwrap();
    let guard = locks.lock("after_removal").await.expect("loads it again");
    guard.release().await.unwrap();
    assert_eq!(library_names(&server), [current()]);
    let missing = on_json(&url, &["functions", "remove", "--version", "1"]).await;
    assert_eq!(missing["removed"][0]["nodes"], serde_json::json!([]));
}

/// A least-privilege client (`FCALL`, no `FUNCTION`) whose version was removed: a new
/// acquisition is refused with the error that says to run `distlock functions load`, and a
/// hold it had is reported lost once its lease runs out unrenewed; after `functions load`
/// the same client works.
#[tokio::test]
async fn a_least_privilege_client_of_a_removed_version_is_told_to_load_it() {
    let server = RedisServer::start();
    let url = server.url();
    let app_rule = [
        "resetkeys",
        "~*",
        "resetchannels",
        "&*",
        "-@all",
        "+@read",
        "+@write",
        "+time",
        "+@pubsub",
        "+@connection",
        "-@dangerous",
        "-@scripting",
        "+fcall",
        "+fcall_ro",
    ];
    let mut app = redis::cmd("ACL");
    app.arg(&["SETUSER", "app", "reset", "on", ">pw"])
        .arg(&app_rule[..]);
    server.command::<()>(&app);
    on_json(&url, &["functions", "load"]).await;
    let app_url = format!("redis://app:pw@127.0.0.1:{}", server.port());
    let locks = LockClient::builder(&app_url)
        .lease(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let held = locks.lock("held").await.expect("the library was loaded");

    let version = LockClient::FUNCTIONS_VERSION.to_string();
    let remove = ["functions", "remove", "--force", "--version", &version];
    on_json(&url, &remove).await;
    let error = locks.lock("next").wait(GENEROUS).await.unwrap_err();
    assert!(
        matches!(&error, LockError::LibraryNotLoaded { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("run `distlock functions load`"));
    tokio::time::timeout(GENEROUS, held.lost())
        .await
        .expect("the unrenewed hold is reported lost");
    assert_eq!(library_names(&server), Vec::<String>::new(), "not reloaded");

    on_json(&url, &["functions", "load"]).await;
    let next = locks.lock("next").await.expect("works once loaded");
    next.release().await.unwrap();
}

/// The guide's operator rule loads, lists and removes with no key or channel; without
/// each of its items, the command that needs it is refused with the rule in the message.
#[tokio::test]
async fn the_operator_rule_loads_lists_and_removes() {
    let server = RedisServer::start();
    let set_ops = |rule: &[&str]| {
        let mut ops = redis::cmd("ACL");
        ops.arg(&["SETUSER", "ops", "reset", "on", ">pw"]).arg(rule);
        server.command::<()>(&ops);
    };
    let ops = format!("redis://ops:pw@127.0.0.1:{}", server.port());
    set_ops(&OPERATOR_RULE);
    on_json(&ops, &["functions", "load"]).await;
    load_by_hand(&server, V1);
    let listed = on_json(&ops, &["functions", "list"]).await;
    assert_eq!(libraries(&listed["nodes"][0]).len(), 2, "{listed}");
    let removed = on_json(&ops, &["functions", "remove", "--version", "1"]).await;
    assert_eq!(removed["removed"][0]["nodes"].as_array().unwrap().len(), 1);

    load_by_hand(&server, V1);
    let needs = [
        ("+function|load", &["functions", "load"][..]),
        ("+function|list", &["functions", "list"][..]),
        (
            "+function|delete",
            &["functions", "remove", "--version", "1"][..],
        ),
    ];
    for (item, command) in needs {
        let rule: Vec<&str> = OPERATOR_RULE.into_iter().filter(|r| *r != item).collect();
        set_ops(&rule);
        let out = on(&ops, command).await;
        assert!(!out.status.success(), "allowed without {item}: {out:?}");
        let text = stderr(&out);
        let command_name = item.trim_start_matches('+');
        assert!(text.contains(command_name), "{item}: {text}");
    }
    assert!(library_names(&server).contains(&"distlock_1".to_owned()));
}

/// Redlock: each node is listed under its `--url`, and a version on one node only is
/// removed from that node.
#[tokio::test]
async fn redlock_nodes_are_listed_and_cleaned_each() {
    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let urls = nodes.each_ref().map(RedisServer::url);
    let mut args = vec!["--redlock"];
    for url in &urls {
        args.extend(["--url", url]);
    }
    run_json(&[&args[..], &["functions", "load"]].concat()).await;
    load_by_hand(&nodes[1], V1);
    let listed = run_json(&[&args[..], &["functions", "list"]].concat()).await;
    let listed = listed["nodes"].as_array().unwrap();
    let named: Vec<&str> = listed.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(named, urls.each_ref().map(String::as_str));
    let counts: Vec<usize> = listed.iter().map(|n| libraries(n).len()).collect();
    assert_eq!(counts, [1, 2, 1]);
    let removed = run_json(&[&args[..], &["functions", "remove", "--older"]].concat()).await;
    assert_eq!(removed["removed"][0]["nodes"], serde_json::json!([urls[1]]));
    for node in &nodes {
        assert_eq!(library_names(node), [current()]);
    }
}

/// A Cluster: `load` reaches every master, `list` reads each master (not one node at
/// random) under its address, and a version one master has is removed from it.
#[tokio::test]
async fn every_master_of_a_cluster_is_listed_and_cleaned() {
    let cluster = RedisCluster::start(3, 0);
    let seeds = cluster.seed_urls();
    let args = ["--cluster", "--url", &seeds[0]];
    run_json(&[&args[..], &["functions", "load"]].concat()).await;
    let masters = cluster.master_indices();
    assert_eq!(masters.len(), 3);
    let odd = &cluster.nodes()[masters[2]];
    load_by_hand(odd, V1);
    let listed = run_json(&[&args[..], &["functions", "list"]].concat()).await;
    let listed = listed["nodes"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    let odd_name = format!("127.0.0.1:{}", odd.port());
    for node in listed {
        let names: Vec<String> = libraries(node).into_iter().map(|l| l.0).collect();
        match node["node"] == odd_name.as_str() {
            true => assert_eq!(names, ["distlock_1".to_owned(), current()]),
            false => assert_eq!(names, [current()], "{node}"),
        }
    }
    let removed = run_json(&[&args[..], &["functions", "remove", "--older"]].concat()).await;
    assert_eq!(
        removed["removed"][0]["nodes"],
        serde_json::json!([odd_name])
    );
    for &master in &masters {
        assert_eq!(library_names(&cluster.nodes()[master]), [current()]);
    }
}

/// `distlock functions source` prints the library as lock-core loads it, without a Redis:
/// loaded by hand on a private server, it is this version's library, and a client calls it
/// without loading it again.
#[tokio::test]
async fn source_prints_the_library_an_operator_loads_by_hand() {
    let out = run(&["--url", "redis://127.0.0.1:1", "functions", "source"]).await;
    assert!(out.status.success(), "{out:?}");
    let source = String::from_utf8(out.stdout).unwrap();
    assert_eq!(source, lock_core::ops::FUNCTIONS_SOURCE);
    let server = RedisServer::start();
    let loaded: String = server.command(redis::cmd("FUNCTION").arg("LOAD").arg(&source));
    let listed = on_json(&server.url(), &["functions", "list"]).await;
    assert!(listed.to_string().contains(&loaded), "{listed}");
    let client = LockClient::builder(server.url()).build().unwrap();
    let guard = tokio::time::timeout(GENEROUS, client.lock("by_hand"))
        .await
        .expect("bounded")
        .unwrap();
    guard.release().await.unwrap();
    let stats: String = server.command(redis::cmd("INFO").arg("commandstats"));
    let loads = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_function|load:"))
        .unwrap_or_default();
    assert!(
        loads.starts_with("cmdstat_function|load:calls=1,"),
        "{loads}"
    );
}
