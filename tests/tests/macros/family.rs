//! `#[distributed_lock]`'s lock family end to end against a real Redis: `mode = "read"` /
//! `"write"`, `keys = [...]` and `permits = n`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{client, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};

/// Counts the bodies inside, and the most seen at once.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Inside {
    async fn stay(&self, hold: Duration) -> usize {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(hold).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        now
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

#[distributed_lock(key = "doc_<id>", mode = "read", client = locks, wait = "30s")]
async fn read(locks: LockClient, id: u64, inside: Arc<Inside>) -> Result<(), LockError> {
    inside.stay(Duration::from_millis(200)).await;
    Ok(())
}

#[distributed_lock(key = "doc_<id>", mode = "write", client = locks, wait = "30s")]
async fn write(
    locks: LockClient,
    id: u64,
    writers: Arc<Inside>,
    readers: Arc<Inside>,
) -> Result<usize, LockError> {
    let readers_inside = readers.now.load(Ordering::SeqCst);
    writers.stay(Duration::from_millis(50)).await;
    Ok(readers_inside)
}

/// Readers of one document run together; a writer runs alone, never beside a reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_mode_fns_share_and_write_mode_fns_exclude() {
    let server = RedisServer::start();
    let (readers, writers) = (Arc::new(Inside::default()), Arc::new(Inside::default()));
    let mut calls = Vec::new();
    for i in 0..8 {
        let locks = client(&server.url());
        let (readers, writers) = (Arc::clone(&readers), Arc::clone(&writers));
        calls.push(tokio::spawn(async move {
            if i % 4 == 3 {
                let beside = write(locks, 7, writers, readers).await.unwrap();
                assert_eq!(beside, 0, "a writer ran beside {beside} readers");
            } else {
                read(locks, 7, readers).await.unwrap();
            }
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    assert!(readers.most() > 1, "readers never ran together");
    assert_eq!(writers.most(), 1);
}

#[distributed_lock(keys = ["acct_<from>", "acct_<to>"], client = locks, wait = "30s")]
async fn transfer(
    locks: LockClient,
    from: u64,
    to: u64,
    inside: Arc<Inside>,
) -> Result<(), LockError> {
    assert_eq!(
        inside.stay(Duration::from_millis(5)).await,
        1,
        "two transfers overlapped"
    );
    Ok(())
}

#[distributed_lock(key = "acct_<id>", client = locks, wait = "0s")]
async fn audit(locks: LockClient, id: u64) -> Result<(), LockError> {
    Ok(())
}

/// Transfers 1 → 2 and 2 → 1 from two clients never deadlock nor overlap, and a transfer
/// excludes a single-key function on either account.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_fns_lock_all_names_in_one_order() {
    let server = RedisServer::start();
    let inside = Arc::new(Inside::default());
    let mut calls = Vec::new();
    for i in 0..4u64 {
        let (locks, inside) = (client(&server.url()), Arc::clone(&inside));
        calls.push(tokio::spawn(async move {
            for _ in 0..25 {
                let (from, to) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
                transfer(locks.clone(), from, to, Arc::clone(&inside))
                    .await
                    .unwrap();
            }
        }));
    }
    for call in calls {
        tokio::time::timeout(Duration::from_secs(120), call)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    assert_eq!(inside.most(), 1);
    let locks = client(&server.url());
    let held = locks.lock("acct_2").await.unwrap();
    let busy = transfer(locks.clone(), 1, 2, Arc::clone(&inside));
    let err = tokio::time::timeout(GENEROUS, async {
        // The transfer waits (30 s) while acct_2 is held: give up from the outside.
        tokio::time::timeout(Duration::from_millis(300), busy).await
    })
    .await
    .unwrap();
    assert!(err.is_err(), "the transfer ran while acct_2 was held");
    held.release().await.unwrap();
    let during = locks.lock_all(["acct_1", "acct_2"]).await.unwrap();
    let refused = audit(client(&server.url()), 1)
        .await
        .expect_err("acct_1 is held");
    assert!(refused.is_wait_timeout(), "{refused}");
    during.release().await.unwrap();
    audit(locks, 1).await.unwrap();
}

#[distributed_lock(key = "export_<tenant>", permits = 2, client = locks, wait = "30s")]
async fn export(locks: LockClient, tenant: u64, inside: Arc<Inside>) -> Result<(), LockError> {
    inside.stay(Duration::from_millis(100)).await;
    Ok(())
}

/// A `permits = 2` function runs at most twice at once, across clients, and does reach 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permits_fns_run_at_most_n_at_once() {
    let server = RedisServer::start();
    let inside = Arc::new(Inside::default());
    let mut calls = Vec::new();
    for _ in 0..8 {
        let (locks, inside) = (client(&server.url()), Arc::clone(&inside));
        calls.push(tokio::spawn(async move { export(locks, 9, inside).await }));
    }
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(inside.most(), 2);
}
