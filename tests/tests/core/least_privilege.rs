//! Least privilege on one server: a Redis user with `FCALL` and no other scripting (no
//! `EVAL`, `EVALSHA`, `SCRIPT` or `FUNCTION`) runs every path once an operator has loaded
//! the library; without it, the first call says what to do, and the same client works once
//! it is loaded. The Cluster's counterpart is in the topologies target.

use distlock_tests::acl::{app_may_run, app_url, representative_paths, set_app_user, APP_RULE};
use distlock_tests::locks::{builder, client, GENEROUS, LIBRARY_NAME};
use distlock_tests::RedisServer;
use lock_core::LockError;

/// The rule refuses every scripting command but `FCALL`/`FCALL_RO` — `+@write` alone
/// would grant `FUNCTION LOAD`, `FLUSH`, `DELETE` and `RESTORE` — and the application's
/// user runs every path, the force release included, on the library an operator loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_user_without_eval_runs_every_path() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    set_app_user(&mut admin, APP_RULE).await;
    let refused: &[&[&str]] = &[
        &["EVAL", "return 1", "0"],
        &["EVALSHA", "0123456789012345678901234567890123456789", "0"],
        &["EVAL_RO", "return 1", "0"],
        &[
            "EVALSHA_RO",
            "0123456789012345678901234567890123456789",
            "0",
        ],
        &["SCRIPT", "LOAD", "return 1"],
        &["SCRIPT", "FLUSH"],
        &["FUNCTION", "LOAD", "#!lua name=x\n"],
        &["FUNCTION", "FLUSH"],
        &["FUNCTION", "DELETE", LIBRARY_NAME],
        &["FUNCTION", "RESTORE", "x"],
        &["FUNCTION", "LIST"],
    ];
    for command in refused {
        assert!(
            !app_may_run(&mut admin, command).await,
            "allowed: {command:?}"
        );
    }
    for command in [
        ["FCALL", "f", "1", "distlock:x"],
        ["FCALL_RO", "f", "1", "distlock:x"],
    ] {
        assert!(
            app_may_run(&mut admin, &command).await,
            "refused: {command:?}"
        );
    }
    client(&server.url())
        .load_functions()
        .await
        .expect("the operator's load");
    representative_paths(&builder(&app_url(&server.url()))).await;
}

/// Without the library and without the right to load it, the first call fails with a
/// typed error telling what to run; once an operator loads it, the same client works.
#[tokio::test]
async fn a_user_who_may_not_load_the_library_is_told_what_to_run() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    set_app_user(&mut admin, APP_RULE).await;
    let app = client(&app_url(&server.url()));
    let error = app.lock("unloaded").wait(GENEROUS).await.unwrap_err();
    assert!(
        matches!(
            &error,
            LockError::LibraryNotLoaded {
                library: LIBRARY_NAME,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_refused() && !error.is_unavailable());
    let text = error.to_string();
    assert!(text.contains("run `distlock functions load`"), "{text}");
    client(&server.url()).load_functions().await.unwrap();
    let guard = app
        .lock("unloaded")
        .await
        .expect("the same client, once loaded");
    guard.release().await.unwrap();
}

/// The control: the same user with `EVALSHA` instead of `FCALL` is refused at the first
/// call — the paths above ran through the functions library.
#[tokio::test]
async fn without_fcall_the_same_user_is_refused() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let rule: Vec<&str> = (APP_RULE.iter().copied())
        .filter(|r| !r.starts_with("+fcall"))
        .chain(["+evalsha", "+eval"])
        .collect();
    set_app_user(&mut admin, &rule).await;
    client(&server.url()).load_functions().await.unwrap();
    let app = client(&app_url(&server.url()));
    let error = app.lock("no_fcall").wait(GENEROUS).await.unwrap_err();
    assert!(matches!(error, LockError::Refused { .. }), "{error:?}");
    assert!(error.to_string().contains("fcall"), "{error}");
}

/// A rule that misses one of distlock's key patterns (here Redisson's read-write lock
/// timeouts, `{distlock:…}:…`) is a refusal, a configuration error, not an outage — though
/// Redis answers it from inside the function as an `ERR`.
#[tokio::test]
async fn a_missing_key_pattern_is_a_refusal() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let rule: Vec<&str> = (APP_RULE.iter().copied())
        .filter(|r| *r != "~{distlock:*")
        .collect();
    set_app_user(&mut admin, &rule).await;
    client(&server.url()).load_functions().await.unwrap();
    let app = client(&app_url(&server.url()));
    let error = app
        .read_lock("no_pattern")
        .wait(GENEROUS)
        .await
        .unwrap_err();
    assert!(matches!(error, LockError::Refused { .. }), "{error:?}");
    assert!(!error.is_unavailable());
}
