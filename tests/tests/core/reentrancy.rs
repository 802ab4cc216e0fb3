//! Reentrancy inside an owner scope.

use std::time::Duration;

use distlock_tests::locks::{client, exists, lock_key, GENEROUS};
use distlock_tests::RedisServer;

/// 10 nested acquisitions in one scope share the hold and its token; another owner waits
/// until the outermost release.
#[tokio::test]
async fn ten_deep_reentry_releases_at_the_outermost() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (ours, theirs) = (client(&server.url()), client(&server.url()));
    lock_core::scope(async {
        let mut guards = Vec::new();
        for _ in 0..10 {
            guards.push(
                ours.lock("nested")
                    .wait(Duration::ZERO)
                    .await
                    .expect("re-enter"),
            );
        }
        let token = guards[0].fencing_token();
        assert!(guards.iter().all(|g| g.fencing_token() == token));
        while guards.len() > 1 {
            guards
                .pop()
                .unwrap()
                .release()
                .await
                .expect("inner release");
            assert!(exists(&mut conn, &lock_key("nested")).await);
            let other = theirs.lock("nested").try_acquire().await.expect("try");
            assert!(
                other.is_none(),
                "another owner got a lock that is still held"
            );
        }
        guards
            .pop()
            .unwrap()
            .release()
            .await
            .expect("outermost release");
    })
    .await;
    let other = theirs
        .lock("nested")
        .wait(GENEROUS)
        .await
        .expect("free now");
    other.release().await.unwrap();
}

/// Outside a scope every acquisition is its own owner: a second one waits.
#[tokio::test]
async fn no_scope_means_no_reentry() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let first = locks.lock("plain").await.expect("acquire");
    assert!(locks.lock("plain").try_acquire().await.unwrap().is_none());
    first.release().await.unwrap();
}

/// Spawned tasks do not inherit the scope's ownership.
#[tokio::test]
async fn spawned_tasks_are_other_owners() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    lock_core::scope(async {
        let guard = locks.lock("spawned").await.expect("acquire");
        let locks2 = locks.clone();
        let child = tokio::spawn(async move { locks2.lock("spawned").try_acquire().await })
            .await
            .unwrap()
            .unwrap();
        assert!(child.is_none());
        guard.release().await.unwrap();
    })
    .await;
}

/// `with_lock` nests: the inner call re-enters the outer's lock.
#[tokio::test]
async fn with_lock_nests() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let out = locks
        .with_lock("outer", async {
            let outer = lock_core::current_lock().unwrap();
            locks
                .with_lock("outer", async {
                    lock_core::current_lock().unwrap().fencing_token() == outer.fencing_token()
                })
                .await
        })
        .await
        .unwrap()
        .unwrap();
    assert!(out);
}

/// An `OwnerScope` entered by two separate futures is one owner: the second acquisition
/// re-enters, and the lock stays held until the outer guard goes (the tower layer takes the
/// lock in one future and runs the handler in another).
#[tokio::test]
async fn an_owner_scope_entered_twice_is_one_owner() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (ours, theirs) = (client(&server.url()), client(&server.url()));
    let owner = lock_core::OwnerScope::current_or_new();
    let outer = owner
        .clone()
        .enter(ours.lock("entered").wait(Duration::ZERO))
        .await
        .expect("acquire");
    let inner = owner
        .clone()
        .enter(ours.lock("entered").wait(Duration::ZERO))
        .await
        .expect("re-enter in the same scope");
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    // Outside the scope this task is another owner.
    assert!(ours.lock("entered").try_acquire().await.unwrap().is_none());
    inner.release().await.expect("inner release");
    assert!(exists(&mut conn, &lock_key("entered")).await);
    assert!(theirs
        .lock("entered")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    outer.release().await.expect("outermost release");
    let other = theirs
        .lock("entered")
        .wait(GENEROUS)
        .await
        .expect("free now");
    other.release().await.unwrap();
}
