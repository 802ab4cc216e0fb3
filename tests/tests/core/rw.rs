//! Read-write locks: readers share, writers are alone, writers are not starved, dead holders
//! release by their lease, Redisson's read-write locks and distlock's exclude each other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::family::run_family;
use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::locks::{
    builder, client, keys_left, lock_key, queue_key, queued, rw_queue_key, wait_until, GENEROUS,
};
use distlock_tests::redisson::RedissonRwLock;
use distlock_tests::RedisServer;
use lock_core::{scope, LockError, LockMode};
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");

/// 4 processes × 8 tasks × 160 holds (1 in 5 writes) of one name, checked by a detector on a
/// second Redis: never a reader beside a writer, never two writers, and readers overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_are_alone_across_processes() {
    let (server, detector) = (RedisServer::start(), RedisServer::start());
    let run = run_family(
        HOLDER,
        (&[&server], &detector),
        "catalog",
        "rw",
        (4, 8, 160),
    )
    .await;
    println!("rw detector: {run:?}");
    assert_eq!(run.entries, 5_120);
    assert_eq!(run.violations, 0);
    assert!(run.writes > 0);
    assert!(run.max_inside > 1, "readers never overlapped");
    assert_eq!(
        keys_left(&mut server.conn().await).await,
        Vec::<String>::new()
    );
}

/// Readers that keep coming, each holding 800 ms, never leave the lock free; a writer that
/// starts waiting still gets it, because new readers queue behind it. The readers come
/// until the writer is done (at most 60 s), so a starved writer would time out; and a
/// reader that asks while the writer holds waits (seen queued, then let in only after).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_is_not_starved_by_a_stream_of_readers() {
    const HOLD: Duration = Duration::from_millis(800);
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = client(&server.url());
    let until = Instant::now() + Duration::from_secs(60);
    let (reading, writing) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let beside_writer = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for i in 0..6u64 {
        let (locks, reading) = (locks.clone(), Arc::clone(&reading));
        let (writing, beside_writer) = (Arc::clone(&writing), Arc::clone(&beside_writer));
        readers.push(tokio::spawn(async move {
            // Staggered starts (load, not ordering): some reader is always inside.
            tokio::time::sleep(Duration::from_millis(i * 130)).await;
            while Instant::now() < until && !writing.load(Ordering::SeqCst) {
                let guard = locks.read_lock("report").wait(until - Instant::now()).await;
                let guard = guard.unwrap();
                if writing.load(Ordering::SeqCst) {
                    beside_writer.fetch_add(1, Ordering::SeqCst);
                }
                reading.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(HOLD).await;
                reading.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    wait_until("readers are inside", GENEROUS, || async {
        reading.load(Ordering::SeqCst) >= 2
    })
    .await;
    let asked = Instant::now();
    let writer = locks.write_lock("report").wait(GENEROUS * 3).await;
    let writer = writer.expect("the writer was starved");
    let waited = asked.elapsed();
    writing.store(true, Ordering::SeqCst);
    assert_eq!(
        reading.load(Ordering::SeqCst),
        0,
        "a reader beside the writer"
    );
    // A reader arriving now queues behind the writer: seen in the queue, not inside.
    let late_reader = tokio::spawn({
        let locks = locks.clone();
        async move { locks.read_lock("report").wait(GENEROUS).await }
    });
    let queue = "distlock__rwwait:{distlock:report}";
    wait_until("a reader queued behind the writer", GENEROUS, || {
        let mut conn = conn.clone();
        async move {
            let queued = queued(&mut conn, queue).await;
            queued >= 1
        }
    })
    .await;
    assert_eq!(
        beside_writer.load(Ordering::SeqCst),
        0,
        "a reader joined the writer"
    );
    assert!(!late_reader.is_finished(), "a reader joined the writer");
    writer.release().await.unwrap();
    late_reader.await.unwrap().unwrap().release().await.unwrap();
    println!("rw: the writer waited {waited:?} behind readers holding {HOLD:?}");
    for reader in readers {
        reader.await.unwrap();
    }
}

/// A SIGKILLed reader's and a SIGKILLed writer's holds end by their 1 s lease: the other
/// side gets the lock within the lease plus a retry, and no key is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_reader_or_writer_releases_by_its_lease() {
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    for (dead, then) in [("read", "write"), ("write", "read")] {
        let args = ["many", &server.url(), "-", "crash_", "1000", "1", dead].map(String::from);
        let mut holder = HolderProcess::spawn(HOLDER, &args);
        holder.expect("HELD", GENEROUS).await;
        let other = match then {
            "write" => locks.write_lock("crash_0"),
            _ => locks.read_lock("crash_0"),
        };
        assert!(matches!(
            locks.write_lock("crash_0").try_acquire().await,
            Ok(None)
        ));
        holder.kill().await;
        let killed = Instant::now();
        let guard = other.wait(GENEROUS).await.unwrap();
        let after = killed.elapsed();
        println!("rw: {then} lock taken {after:?} after SIGKILL of the {dead} holder");
        assert!(after < Duration::from_secs(4), "{after:?}");
        guard.release().await.unwrap();
    }
    assert_eq!(
        keys_left(&mut server.conn().await).await,
        Vec::<String>::new()
    );
}

/// In one scope, the write lock covers reading (same hold, same token); asking for the write
/// lock while holding only the read lock is refused, not a self-deadlock. A writer's token
/// is above every token issued before for the name.
#[tokio::test]
async fn reentry_and_tokens() {
    let server = RedisServer::start();
    let (locks, other) = (client(&server.url()), client(&server.url()));
    scope(async {
        let write = locks.write_lock("doc").await.unwrap();
        let read = locks.read_lock("doc").await.unwrap();
        assert_eq!(read.fencing_token(), write.fencing_token());
        assert_eq!(read.mode(), LockMode::Write);
        drop(read);
        assert!(write.is_held());
        write.release().await.unwrap();
    })
    .await;
    scope(async {
        let read = locks.read_lock("doc").await.unwrap();
        let err = locks.write_lock("doc").await.expect_err("no upgrade");
        assert!(
            matches!(&err, LockError::InvalidRequest { reason, .. } if reason.contains("upgrad")),
            "{err}"
        );
        let err = locks
            .lock("doc")
            .await
            .expect_err("not the same kind of hold");
        assert!(matches!(err, LockError::InvalidRequest { .. }), "{err}");
        read.release().await.unwrap();
    })
    .await;
    let mut issued = Vec::new();
    for _ in 0..5 {
        let (a, b) = (
            locks.read_lock("doc").await.unwrap(),
            other.read_lock("doc").await.unwrap(),
        );
        issued.extend([a.fencing_token(), b.fencing_token()]);
        let writer = tokio::spawn({
            let other = other.clone();
            async move { other.write_lock("doc").wait(GENEROUS).await }
        });
        // The writer waits in the queue before the readers leave (else this proves nothing).
        wait_until("the writer queued", GENEROUS, || async {
            rw_queued(&server, "doc").await == 1
        })
        .await;
        a.release().await.unwrap();
        b.release().await.unwrap();
        let writer = writer.await.unwrap().unwrap();
        assert!(
            issued.iter().all(|t| *t < writer.fencing_token()),
            "writer {} after {issued:?}",
            writer.fencing_token()
        );
        issued.push(writer.fencing_token());
        writer.release().await.unwrap();
    }
}

/// The watchdog keeps a reader and a writer past several leases (in the same per-tick
/// batch as the other locks); `lost()` fires when a reader's hold is deleted.
#[tokio::test]
async fn the_watchdog_renews_both_sides_and_lost_fires() {
    let server = RedisServer::start();
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let read = locks.read_lock("renewed_r").await.unwrap();
    let write = locks.write_lock("renewed_w").await.unwrap();
    let plain = locks.lock("renewed_x").await.unwrap();
    assert_eq!(locks.renewing(), 3);
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert!(read.is_held() && write.is_held() && plain.is_held());
    let other = client(&server.url());
    assert!(other
        .write_lock("renewed_r")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .read_lock("renewed_w")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let lost = read.lost();
    let mut conn = server.conn().await;
    let () = redis::AsyncCommands::del(&mut conn, lock_key("renewed_r"))
        .await
        .unwrap();
    tokio::time::timeout(GENEROUS, lost)
        .await
        .expect("lost fires");
    assert!(!read.is_held());
    write.release().await.unwrap();
    plain.release().await.unwrap();
}

/// Redisson's read-write lock and distlock's, on the same key: a Redisson writer excludes
/// distlock's readers and writers, Redisson readers share with distlock readers, a distlock
/// writer excludes Redisson's readers and writers, and a Redisson writer blocked on a
/// distlock reader wakes on its release.
#[tokio::test]
async fn redisson_interop_both_ways() {
    let server = RedisServer::start();
    let locks = builder(&server.url()).key_prefix("").build().unwrap();
    let lease = Duration::from_secs(30);
    let mut java = RedissonRwLock::new(&server.url(), "orders", 7).await;
    let mut java_reader = RedissonRwLock::new(&server.url(), "orders", 8).await;

    assert_eq!(java.try_write(lease).await, None);
    assert!(locks
        .read_lock("orders")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(locks
        .write_lock("orders")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(java.unlock_write(lease).await, Some(1));

    assert_eq!(java_reader.try_read(lease).await, None);
    let ours = locks.read_lock("orders").try_acquire().await.unwrap();
    let ours = ours.expect("readers share with Redisson's readers");
    assert!(java.try_write(lease).await.is_some());
    assert!(locks
        .write_lock("orders")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        java_reader.unlock_read().await,
        Some(0),
        "distlock's reader remains"
    );
    assert!(java.try_write(lease).await.is_some());

    let started = Instant::now();
    let blocked = tokio::spawn(async move {
        java.write(lease, GENEROUS).await;
        java
    });
    let conn = server.conn().await;
    wait_until("Redisson's writer listens", GENEROUS, || {
        let mut conn = conn.clone();
        async move {
            let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redisson_rwlock:{orders}")
                .query_async(&mut conn)
                .await
                .unwrap();
            counts[0].1 == 1
        }
    })
    .await;
    ours.release().await.unwrap();
    let mut java = blocked.await.unwrap();
    println!(
        "rw interop: Redisson's writer woke {:?} after distlock's release",
        started.elapsed()
    );
    assert!(locks
        .read_lock("orders")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(java.unlock_write(lease).await, Some(1));

    let writer = locks.write_lock("orders").await.unwrap();
    assert!(java.try_read(lease).await.is_some());
    assert!(java.try_write(lease).await.is_some());
    writer.release().await.unwrap();
    assert_eq!(java.try_read(lease).await, None);
    assert_eq!(java.unlock_read().await, Some(1));
    // Only Redisson's own unlock latches (13.5 s each) are left.
    let left = keys_left(&mut server.conn().await).await;
    assert!(
        left.iter().all(|k| k.starts_with("redisson_unlock_latch:")),
        "{left:?}"
    );
}

/// A name held by `client.lock` is busy for read-write locks, which leave it alone (and the
/// other way round): one name, one kind of lock.
#[tokio::test]
async fn an_exclusive_lock_of_the_name_is_busy_and_untouched() {
    let server = RedisServer::start();
    let (locks, other) = (client(&server.url()), client(&server.url()));
    let plain = locks.lock("mixed").await.unwrap();
    assert!(other
        .read_lock("mixed")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .write_lock("mixed")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(plain.is_held());
    plain.release().await.unwrap();
    let read = other.read_lock("mixed").await.unwrap();
    assert!(locks.lock("mixed").try_acquire().await.unwrap().is_none());
    // A waiter of one kind is never handed a hold of the other: it waits for the name to be
    // free, then takes its own kind.
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("mixed").wait(GENEROUS).await }
    });
    let conn = server.conn().await;
    wait_until("the exclusive waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, &queue_key("mixed")).await == 1 }
    })
    .await;
    let reader_waiting = tokio::spawn({
        let other = other.clone();
        async move { other.write_lock("mixed").wait(GENEROUS).await }
    });
    wait_until("the writer queued", GENEROUS, || async {
        rw_queued(&server, "mixed").await == 1
    })
    .await;
    read.release().await.unwrap();
    // The writer is in the read-write lock's queue and is handed it; the exclusive waiter
    // waits on, then takes the exclusive lock once the writer is done.
    let writer = reader_waiting.await.unwrap().unwrap();
    assert_eq!(writer.mode(), LockMode::Write);
    assert!(
        !waiting.is_finished(),
        "an exclusive hold beside the writer"
    );
    writer.release().await.unwrap();
    let plain = waiting.await.unwrap().unwrap();
    assert_eq!(plain.mode(), LockMode::Exclusive);
    assert!(other
        .read_lock("mixed")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    plain.release().await.unwrap();
    assert_eq!(
        keys_left(&mut server.conn().await).await,
        Vec::<String>::new()
    );
}

/// Waiters in the read-write lock queue of `name` (default prefix).
async fn rw_queued(server: &RedisServer, name: &str) -> usize {
    queued(&mut server.conn().await, &rw_queue_key(name)).await
}
