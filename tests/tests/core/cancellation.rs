//! Cancellation never leaves a lock behind.

use std::time::Duration;

use distlock_tests::locks::{builder, client, exists, lock_key, wait_gone, wait_until, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use lock_core::ReplicaAck;

/// Dropping the acquire future at any point — before sending, while the script is in
/// flight through a slow link, after Redis ran it — leaves no lock held once the drop settled.
/// Some cuts must land after Redis ran the script and before its reply arrived (the key is
/// there right after the drop), or the test would not cover the hard case.
#[tokio::test]
async fn dropped_acquisition_leaves_no_lock() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    proxy.set_latency(Duration::from_millis(20));
    let mut conn = server.conn().await;
    let locks = builder(&proxy.url()).build().unwrap();
    // Warm the connection so the windows below cover the script, not the connect.
    locks.lock("warm").await.unwrap().release().await.unwrap();
    let mut ran_unseen = 0;
    for step in 0..16u64 {
        let cut = Duration::from_millis(step * 5);
        let attempt = tokio::time::timeout(cut, locks.lock("cancel").acquire()).await;
        match attempt {
            // Finished before the cut: a normal guard, released on drop.
            Ok(result) => drop(result.expect("acquire")),
            // Cut: if the key is there now, Redis ran the script and the reply was unseen.
            Err(_) => ran_unseen += usize::from(exists(&mut conn, &lock_key("cancel")).await),
        }
        wait_gone(&mut conn, &lock_key("cancel"), GENEROUS).await;
    }
    assert!(
        ran_unseen > 0,
        "no cut fell between Redis' grant and its reply"
    );
}

/// Dropping an acquisition while it waits for replica acknowledgements (`WAIT`, after Redis
/// granted the lock) leaves no lock: the guard exists before that wait. No replica here, so
/// the `WAIT` lasts its whole timeout.
#[tokio::test]
async fn dropped_during_replica_wait_leaves_no_lock() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .replica_ack(ReplicaAck::Require {
            replicas: 1,
            timeout: Duration::from_secs(30),
        })
        .build()
        .unwrap();
    let acquiring = tokio::spawn(async move { locks.lock("unreplicated").await });
    wait_until("Redis granted the lock", GENEROUS, || {
        let mut conn = conn.clone();
        async move { exists(&mut conn, &lock_key("unreplicated")).await }
    })
    .await;
    acquiring.abort();
    wait_gone(&mut conn, &lock_key("unreplicated"), Duration::from_secs(1)).await;
}

/// The same while another owner holds the lock and the request is waiting.
#[tokio::test]
async fn dropped_waiter_leaves_no_lock_and_no_subscription() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let guard = holder.lock("busy").await.unwrap();
    let attempt = tokio::time::timeout(
        Duration::from_millis(300),
        waiter.lock("busy").wait(Duration::from_secs(60)).acquire(),
    )
    .await;
    assert!(attempt.is_err(), "the waiter cannot have acquired");
    assert_eq!(waiter.waited_channels(), 0);
    guard.release().await.unwrap();
    wait_gone(&mut conn, &lock_key("busy"), GENEROUS).await;
}

/// Dropping a guard releases within 1 s; so does a task aborted while holding one.
#[tokio::test]
async fn dropped_guard_and_aborted_task_release() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    drop(locks.lock("dropped").await.unwrap());
    wait_gone(&mut conn, &lock_key("dropped"), Duration::from_secs(1)).await;

    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let locks = locks.clone();
        async move {
            locks
                .with_lock("aborted", async move {
                    let _ = held_tx.send(());
                    std::future::pending::<()>().await;
                })
                .await
        }
    });
    held_rx.await.unwrap();
    assert!(exists(&mut conn, &lock_key("aborted")).await);
    task.abort();
    wait_gone(&mut conn, &lock_key("aborted"), Duration::from_secs(1)).await;
}

/// A panic inside `with_lock` releases the lock.
#[tokio::test]
async fn panic_in_guarded_work_releases() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let task = tokio::spawn({
        let locks = locks.clone();
        async move { locks.with_lock("panics", async { panic!("boom") }).await }
    });
    assert!(task.await.unwrap_err().is_panic());
    wait_gone(&mut conn, &lock_key("panics"), Duration::from_secs(1)).await;
}

/// A waiting acquisition dropped, then `shutdown()`, then the runtime ended (a process that
/// exits on a signal): the queue leave the drop left to the background ran before the
/// runtime went, so the lock has no waiter. Control: without `shutdown()`, the runtime ends
/// before the leave runs, and the entry stays.
#[tokio::test]
async fn shutdown_waits_for_the_queue_leave_of_a_dropped_waiter() {
    let server = RedisServer::start();
    let holder = client(&server.url());
    let guard = holder.lock("leaving").await.unwrap();
    for (name, shut_down, waiters) in [("leaving", true, 0), ("leaving", false, 1)] {
        let url = server.url();
        let exited = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let waiter = client(&url);
                let waiting = waiter.lock(name).wait(Duration::from_secs(60)).acquire();
                // Queued by then: the first attempt answers within milliseconds.
                let cut = tokio::time::timeout(Duration::from_secs(1), waiting).await;
                assert!(cut.is_err(), "the waiter cannot have acquired");
                if shut_down {
                    waiter.shutdown().await.unwrap();
                }
            });
        });
        exited.join().unwrap();
        let state = holder.inspect(name).await.unwrap();
        assert_eq!(state.waiters(), waiters, "shutdown {shut_down}: {state:?}");
    }
    guard.release().await.unwrap();
}
