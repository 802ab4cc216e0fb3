//! Any bytes in a name either work or give `InvalidName`; none can move or merge locks.

use distlock_tests::locks::{builder, client, exists};
use distlock_tests::RedisServer;
use lock_core::{LockError, LockName};

/// Braces, glob characters, NUL, CRLF and non-UTF-8 bytes all work as distinct locks, and
/// braces never become a hash tag.
#[tokio::test]
async fn odd_bytes_are_distinct_locks() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let names: Vec<LockName> = vec![
        "a{b}c".into(),
        "a%7Bb%7Dc".into(),
        "{}".into(),
        "*?[x]".into(),
        b"nul\0byte".as_slice().into(),
        "cr\r\nlf".into(),
        vec![0xff, 0xfe, b'{'].into(),
    ];
    let mut guards = Vec::new();
    for name in &names {
        let guard = locks
            .lock(name)
            .try_acquire()
            .await
            .expect("valid name")
            .unwrap_or_else(|| panic!("{name} collided with an earlier name"));
        guards.push(guard);
    }
    assert!(exists(&mut conn, "distlock:a%7Bb%7Dc").await);
    assert!(exists(&mut conn, "distlock:a%257Bb%257Dc").await);
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("distlock:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), names.len());
    for key in &keys {
        assert!(
            !key.contains(&b'{') && !key.contains(&b'}'),
            "{key:?} carries a hash tag"
        );
    }
    for g in guards {
        g.release().await.unwrap();
    }
}

/// Empty and over-long names are rejected with `InvalidName`; the limit is configurable.
#[tokio::test]
async fn empty_and_long_names_are_rejected() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let long = vec![b'x'; 10_000];
    let err = locks.lock(long.clone()).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidName { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("10000 bytes is longer than the limit of 1024"),
        "{err}"
    );
    let err = locks.lock("").await.unwrap_err();
    assert!(matches!(err, LockError::InvalidName { .. }), "{err}");

    let roomy = builder(&server.url()).max_name_len(20_000).build().unwrap();
    roomy
        .lock(long)
        .await
        .expect("within the raised limit")
        .release()
        .await
        .unwrap();
}

/// A name whose key already holds something else (an application key under the prefix) is
/// refused with the lock named — not reported as an outage — and the value is untouched.
#[tokio::test]
async fn a_key_of_another_type_is_refused_and_left_alone() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let key = distlock_tests::locks::lock_key("clash");
    let () = redis::AsyncCommands::set(&mut conn, &key, "app data")
        .await
        .unwrap();
    let err = client(&server.url())
        .lock("clash")
        .try_acquire()
        .await
        .unwrap_err();
    assert!(err.is_refused() && !err.is_unavailable(), "{err}");
    assert!(
        err.to_string().contains("`clash`") && err.to_string().contains("WRONGTYPE"),
        "{err}"
    );
    let value: String = redis::AsyncCommands::get(&mut conn, &key).await.unwrap();
    assert_eq!(value, "app data");
}
