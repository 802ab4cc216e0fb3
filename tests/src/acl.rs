//! Least privilege: the ACL rule an application's Redis user needs (the README's), and the
//! library's representative paths run as such a user, on one server or a Cluster.
//!
//! The rule allows `FCALL`/`FCALL_RO` and no other scripting: no `EVAL`/`EVALSHA`, no
//! `SCRIPT`, no `FUNCTION` — so the library is loaded by an operator (`distlock functions
//! load`, [`LockClient::load_functions`]).

use std::time::Duration;

use lock_core::idempotency::{IdempotencyError, Outcome};
use lock_core::job::JobOutcome;
use lock_core::{LockClient, LockClientBuilder};
use redis::aio::MultiplexedConnection;

use crate::locks::{wait_until, GENEROUS};

/// The application's user and password.
pub const APP_USER: &str = "app";
const APP_PASSWORD: &str = "pw";

/// The rule, after `ACL SETUSER app reset on >pw`: the keys under distlock's default prefix
/// `distlock:` (the locks, their queues and records, Redisson's read-write lock timeouts
/// `{distlock:…}:…`), the channels (releases on Redisson's channels and distlock's own,
/// grants, each client's revocations), the data commands the functions call
/// (`+@read +@write`), `TIME`, pub/sub, the connection commands (`PING` for readiness,
/// `WAIT` for replica acknowledgements, `ASKING` on a Cluster), and `FCALL`/`FCALL_RO`. `-@scripting`
/// comes after `+@write`, which grants `FUNCTION LOAD|FLUSH|DELETE|RESTORE` (write
/// commands), and `-@dangerous` takes out `KEYS`, `FLUSHALL`, `CLIENT KILL` and the like.
pub const APP_RULE: &[&str] = &[
    "resetkeys",
    "~distlock:*",
    "~distlock__*",
    "~{distlock:*",
    "resetchannels",
    "&redisson_lock__channel:{distlock:*",
    "&redisson_rwlock:{distlock:*",
    "&distlock__*",
    "&distlock:revoke:*",
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

/// On a Cluster the client also reads the slot map.
pub const CLUSTER_EXTRA: &[&str] = &["+cluster|slots"];

/// Creates (or replaces) the application's user on the server of `conn` with `rule`.
/// ACLs do not replicate: a Cluster needs it on every node.
pub async fn set_app_user(conn: &mut MultiplexedConnection, rule: &[&str]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(APP_USER).arg("reset").arg("on");
    cmd.arg(format!(">{APP_PASSWORD}")).arg(rule);
    let () = cmd.query_async(conn).await.expect("ACL SETUSER");
}

/// `redis://app:pw@host:port` for the server at `url` (`redis://host:port`).
pub fn app_url(url: &str) -> String {
    let address = url.strip_prefix("redis://").expect("a redis:// URL");
    format!("redis://{APP_USER}:{APP_PASSWORD}@{address}")
}

/// True when the server would let the application's user run `command` (`ACL DRYRUN`:
/// `OK`, else the refusal's text).
pub async fn app_may_run(conn: &mut MultiplexedConnection, command: &[&str]) -> bool {
    let answer: String = redis::cmd("ACL")
        .arg("DRYRUN")
        .arg(APP_USER)
        .arg(command)
        .query_async(conn)
        .await
        .expect("ACL DRYRUN");
    answer == "OK"
}

/// Every kind of hold and every feature built on them, as clients of `app` (the
/// application's user) use them: a readiness ping; an exclusive lock's acquire, contended
/// hand-off and release; a read-write lock; a semaphore; a multi-lock; a scheduled job; an election; an
/// idempotency key; a watchdog renewal past the lease; a force release (by another
/// application client: it is a function call like the others). Panics naming the first
/// path that fails.
pub async fn representative_paths(app: &LockClientBuilder) {
    let build = || app.clone().build().expect("the application's client");
    let (a, b, c) = (build(), build(), build());
    a.ping().await.expect("ping");
    exclusive(&a, &b).await;
    read_write(&a, &b, &c).await;
    semaphore(&a, &b, &c).await;
    multi_lock(&a, &b).await;
    job(&a, &b).await;
    election(&a, &b).await;
    idempotency(&a, &b).await;
    // Renewed every third of the lease; several leases held.
    let short = app.clone().lease(Duration::from_secs(2)).build().unwrap();
    watchdog(&short, &b).await;
    force_release(&a, &b).await;
}

/// Waits until `client` waits on one channel (its waiter subscribed).
async fn subscribed(client: &LockClient) {
    wait_until("the waiter subscribed", GENEROUS, || async {
        client.waited_channels() == 1
    })
    .await;
}

async fn exclusive(a: &LockClient, b: &LockClient) {
    let held = a.lock("acl_lock").await.expect("lock: acquire");
    let busy = b.lock("acl_lock").try_acquire().await.expect("lock: try");
    assert!(busy.is_none(), "lock: taken twice");
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.lock("acl_lock").wait(GENEROUS).await }
    });
    subscribed(b).await;
    held.release().await.expect("lock: release");
    let next = waiting.await.unwrap().expect("lock: handed over");
    next.release().await.expect("lock: release after hand-off");
}

async fn read_write(a: &LockClient, b: &LockClient, c: &LockClient) {
    let reading = a.read_lock("acl_rw").await.expect("rw: read");
    let also = b.read_lock("acl_rw").await.expect("rw: second reader");
    let writer = c.write_lock("acl_rw").try_acquire().await.expect("rw: try");
    assert!(writer.is_none(), "rw: a writer beside readers");
    let waiting = tokio::spawn({
        let c = c.clone();
        async move { c.write_lock("acl_rw").wait(GENEROUS).await }
    });
    subscribed(c).await;
    reading.release().await.expect("rw: release a reader");
    also.release().await.expect("rw: release the other");
    let writing = waiting
        .await
        .unwrap()
        .expect("rw: writer after the readers");
    writing.release().await.expect("rw: release the writer");
}

async fn semaphore(a: &LockClient, b: &LockClient, c: &LockClient) {
    let first = a
        .semaphore("acl_sem", 2)
        .await
        .expect("semaphore: permit 1");
    let second = b
        .semaphore("acl_sem", 2)
        .await
        .expect("semaphore: permit 2");
    let third = c
        .semaphore("acl_sem", 2)
        .try_acquire()
        .await
        .expect("semaphore: try");
    assert!(third.is_none(), "semaphore: a third permit of 2");
    let waiting = tokio::spawn({
        let c = c.clone();
        async move { c.semaphore("acl_sem", 2).wait(GENEROUS).await }
    });
    subscribed(c).await;
    first.release().await.expect("semaphore: release");
    let third = waiting
        .await
        .unwrap()
        .expect("semaphore: permit handed over");
    for permit in [second, third] {
        permit.release().await.expect("semaphore: release");
    }
}

async fn multi_lock(a: &LockClient, b: &LockClient) {
    let names = ["acl_from", "acl_to"];
    let both = a.lock_all(names).await.expect("lock_all: acquire");
    let one = b.lock("acl_to").try_acquire().await.expect("lock_all: try");
    assert!(one.is_none(), "lock_all: a member taken beside it");
    both.release().await.expect("lock_all: release");
    let again = b
        .lock_all(names)
        .try_acquire()
        .await
        .expect("lock_all: try");
    again
        .expect("lock_all: free after release")
        .release()
        .await
        .unwrap();
}

async fn job(a: &LockClient, b: &LockClient) {
    let held = b.lock("acl_job").await.expect("job: hold its name");
    let skipped = a.job("acl_job").run(async { 1 }).await.expect("job: skip");
    assert!(skipped.is_skipped(), "job: ran while held: {skipped:?}");
    held.release().await.unwrap();
    let fire = a.job("acl_job").run(async { 7 }).await.expect("job: run");
    assert_eq!(fire, JobOutcome::Ran(7));
}

async fn election(a: &LockClient, b: &LockClient) {
    let term = a
        .election("acl_leader")
        .campaign()
        .await
        .expect("election: campaign");
    let leader = b
        .election("acl_leader")
        .leader()
        .await
        .expect("election: leader");
    let token = leader.map(|l| l.fencing_token());
    assert_eq!(
        token,
        Some(term.fencing_token()),
        "election: the leader read"
    );
    term.resign().await.expect("election: resign");
    let leader = b
        .election("acl_leader")
        .leader()
        .await
        .expect("election: leader");
    assert!(leader.is_none(), "election: a leader after the resignation");
}

async fn idempotency(a: &LockClient, b: &LockClient) {
    let work = |n: u64| async move { Ok::<_, IdempotencyError>(n) };
    let ran = a.idempotent("acl_key", "fp", work(7)).await;
    assert_eq!(ran.expect("idempotency: run"), Outcome::Ran(7));
    let replayed = b.idempotent("acl_key", "fp", work(8)).await;
    assert_eq!(replayed.expect("idempotency: replay"), Outcome::Replayed(7));
}

async fn watchdog(short: &LockClient, other: &LockClient) {
    let guard = short.lock("acl_watch").await.expect("watchdog: acquire");
    // Three leases: without a renewal the lock would be lost, and free for `other`.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(guard.is_held(), "watchdog: lost past its lease");
    let taken = other
        .lock("acl_watch")
        .try_acquire()
        .await
        .expect("watchdog: try");
    assert!(taken.is_none(), "watchdog: free past its lease");
    guard.release().await.expect("watchdog: release");
}

async fn force_release(a: &LockClient, b: &LockClient) {
    let guard = a.lock("acl_stuck").await.expect("force release: acquire");
    // The holder hears at once, on its revocation channel (else at its next renewal).
    let told = b.force_release_notified("acl_stuck").await;
    assert_eq!(
        told.expect("force release"),
        Some(1),
        "force release: holders told"
    );
    tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("force release: the holder was told");
    let next = b
        .lock("acl_stuck")
        .try_acquire()
        .await
        .expect("force release: try");
    assert!(next.is_some(), "force release: still held");
}
