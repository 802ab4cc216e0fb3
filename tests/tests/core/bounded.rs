//! Nothing distlock writes outlives its lock: distinct names leave no key behind, whether
//! their holders release them or die; and fencing tokens keep rising when all of a name's
//! state is gone.

use std::time::Duration;

use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::locks::{builder, client, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use futures_util::{stream, StreamExt};
use redis::aio::MultiplexedConnection;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");

async fn dbsize(conn: &mut MultiplexedConnection) -> u64 {
    redis::cmd("DBSIZE")
        .query_async(conn)
        .await
        .expect("DBSIZE")
}

/// 100,000 distinct names acquired and released (32 at a time) leave the key count where it
/// was — at once, not after a lease — and 1,000 names held by a process that is then
/// SIGKILLed are gone once their lease (1 s, watchdog-renewed until the kill) ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_names_leave_no_key_behind() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let () = redis::cmd("SET")
        .arg("unrelated")
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let start = dbsize(&mut conn).await;
    let locks = client(&server.url());
    stream::iter(0..100_000)
        .for_each_concurrent(32, |i| {
            let locks = locks.clone();
            async move {
                let guard = locks.lock(format!("order_{i}")).await.expect("free name");
                guard.release().await.expect("released");
            }
        })
        .await;
    assert_eq!(
        dbsize(&mut conn).await,
        start,
        "keys left by 100,000 released names"
    );

    let lease = Duration::from_secs(1);
    let args = [
        "many",
        &server.url(),
        "-",
        "crashed_",
        &lease.as_millis().to_string(),
        "1000",
    ]
    .map(str::to_owned);
    let mut holder = HolderProcess::spawn(HOLDER, &args);
    holder.expect("HELD", GENEROUS * 3).await;
    assert_eq!(
        dbsize(&mut conn).await,
        start + 1_000,
        "one key per held lock"
    );
    holder.kill().await;
    wait_until("the dead holder's locks expired", lease + GENEROUS, || {
        let mut conn = conn.clone();
        async move { dbsize(&mut conn).await == start }
    })
    .await;
}

/// A name's tokens rise across five cycles of "release, wait until none of its keys is
/// left, acquire again" — also when the holder never released and its lease ran out.
#[tokio::test]
async fn tokens_rise_when_all_of_a_names_state_is_gone() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = builder(&server.url()).build().unwrap();
    let mut last = 0;
    for cycle in 0..5 {
        let guard = locks
            .lock("reborn")
            .lease(Duration::from_millis(200))
            .await
            .unwrap();
        let token = guard.fencing_token();
        assert!(token > last, "cycle {cycle}: token {token} after {last}");
        last = token;
        if cycle % 2 == 0 {
            guard.release().await.unwrap();
        } else {
            // A holder that vanished: its state goes with its lease.
            std::mem::forget(guard);
        }
        wait_until("no key of the name is left", GENEROUS, || {
            let mut conn = conn.clone();
            async move { dbsize(&mut conn).await == 0 }
        })
        .await;
    }
}
