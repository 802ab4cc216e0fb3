//! Guarded writes: commands that commit in one call only while the hold is current.

use std::time::Duration;

use distlock_tests::locks::{builder, client, command_calls, reset_stats, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{current_lock, LockError};
use redis::AsyncCommands;

/// A current hold writes and reads its replies; the keys it names are in the lock's slot.
#[tokio::test]
async fn a_current_hold_writes_and_gets_the_replies() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("item_7").await.unwrap();
    let stock = guard.key("stock");
    assert_eq!(stock, "{distlock:item_7}:stock");
    let () = conn.set(&stock, 3).await.unwrap();
    let mut sale = redis::pipe();
    sale.cmd("DECR")
        .arg(&stock)
        .cmd("RPUSH")
        .arg(guard.key("buyers"))
        .arg("alice");
    let (left, buyers): (i64, i64) = guard.write(&sale).await.unwrap();
    assert_eq!((left, buyers), (2, 1));
    // As a redis-rs MULTI/EXEC pipeline: a command that fails at run time fails the call,
    // and does not undo the others.
    let mut mixed = redis::pipe();
    mixed
        .cmd("LPUSH")
        .arg(&stock)
        .arg("x")
        .cmd("INCR")
        .arg(&stock);
    let failed = guard.write::<redis::Value>(&mixed).await.unwrap_err();
    assert!(
        failed.is_refused() && failed.to_string().contains("WRONGTYPE"),
        "{failed}"
    );
    let value: i64 = conn.get(&stock).await.unwrap();
    assert_eq!(value, 3, "the INCR after it ran");
    assert!(guard.is_held(), "a failed command is no lost lock");
    guard.release().await.unwrap();
}

/// A hold that is no longer current writes nothing, and learns it lost the lock.
#[tokio::test]
async fn a_hold_taken_over_writes_nothing() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("item_8").await.unwrap();
    let stock = guard.key("stock");
    let () = conn.set(&stock, 10).await.unwrap();
    assert!(locks.force_release("item_8").await.unwrap());
    let other = locks.lock("item_8").wait(GENEROUS).await.unwrap();
    let mut stale = redis::pipe();
    stale.cmd("DECR").arg(&stock);
    let refused = guard.write::<(i64,)>(&stale).await.unwrap_err();
    assert!(refused.is_lost(), "{refused:?}");
    assert!(refused.to_string().contains("`item_8`"), "{refused}");
    assert!(!guard.is_held());
    let value: i64 = conn.get(&stock).await.unwrap();
    assert_eq!(value, 10, "nothing was written");
    // The current holder writes.
    let (left,): (i64,) = other.write(&stale).await.unwrap();
    assert_eq!(left, 9);
    other.release().await.unwrap();
}

/// The write side of a read-write lock and a semaphore's permit write; a read hold and
/// commands off the allow-list are refused before anything is sent.
#[tokio::test]
async fn kinds_and_commands_are_checked_before_sending() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let mut incr = redis::pipe();
    incr.cmd("INCR").arg("{distlock:doc}:n");
    let writer = locks.write_lock("doc").await.unwrap();
    let (n,): (i64,) = writer.write(&incr).await.unwrap();
    assert_eq!(n, 1);
    writer.release().await.unwrap();
    let permit = locks.semaphore("doc_pool", 2).await.unwrap();
    let (n,): (i64,) = permit.write(&incr).await.unwrap();
    assert_eq!(n, 2);
    let reader = locks.read_lock("doc").await.unwrap();
    let refused = reader.write::<(i64,)>(&incr).await.unwrap_err();
    assert!(
        matches!(refused, LockError::InvalidRequest { .. }),
        "{refused:?}"
    );
    reset_stats(&mut conn).await;
    for command in ["EVAL", "FLUSHALL", "BLPOP", "CONFIG"] {
        let mut pipe = redis::pipe();
        pipe.cmd(command).arg("{distlock:doc}:n");
        let refused = permit.write::<redis::Value>(&pipe).await.unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains(&format!("`{command}`")) && text.contains("`doc_pool`"),
            "{text}"
        );
    }
    let mut own = redis::pipe();
    own.cmd("DEL").arg("distlock:doc_pool");
    let refused = permit.write::<redis::Value>(&own).await.unwrap_err();
    assert!(refused.to_string().contains("own keys"), "{refused}");
    let (calls, stats) = command_calls(&mut conn).await;
    assert!(
        !calls.contains_key("fcall"),
        "refused before sending: {stats}"
    );
    permit.release().await.unwrap();
    reader.release().await.unwrap();
}

/// A permit whose lease ran out writes nothing, even before anyone else took it.
#[tokio::test]
async fn an_expired_permit_writes_nothing() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url()).build().unwrap();
    let permit = locks
        .semaphore("pool", 1)
        .lease(Duration::from_millis(300))
        .await
        .unwrap();
    let key = permit.key("n");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut incr = redis::pipe();
    incr.cmd("INCR").arg(&key);
    let refused = permit.write::<(i64,)>(&incr).await.unwrap_err();
    assert!(refused.is_lost(), "{refused:?}");
    let exists: bool = conn.exists(&key).await.unwrap();
    assert!(!exists);
}

/// Inside `run` (and so in a `#[distributed_lock]` body or a lock-tower handler) the current
/// lock writes.
#[tokio::test]
async fn the_current_lock_writes_inside_run() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let left = locks
        .lock("item_9")
        .run(async {
            let lock = current_lock().expect("inside run");
            let mut pipe = redis::pipe();
            pipe.cmd("SET").arg(lock.key("stock").unwrap()).arg(5);
            pipe.cmd("DECR").arg(lock.key("stock").unwrap());
            lock.write::<((), i64)>(&pipe).await
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(left.1, 4);
}
