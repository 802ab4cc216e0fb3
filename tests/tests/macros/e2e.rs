//! `#[distributed_lock]` end to end against a real Redis: exclusion, concurrency of different
//! keys, reentrancy, loss, errors, and release on panic and cancellation.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use distlock_tests::locks::{
    builder, client, exists, lock_key, pttl, queue_key, queued, wait_gone, wait_until, GENEROUS,
};
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::sync::{oneshot, Barrier, Notify};

/// The error type of the functions under test: lock failures arrive through `From`.
#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Redis(redis::RedisError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl From<redis::RedisError> for AppError {
    fn from(e: redis::RedisError) -> Self {
        AppError::Redis(e)
    }
}

impl AppError {
    fn lock(self) -> LockError {
        match self {
            AppError::Lock(e) => e,
            AppError::Redis(e) => panic!("expected a lock error, got redis error {e}"),
        }
    }
}

/// Read-modify-write of a Redis counter with an await in between: exact only under the lock.
#[distributed_lock(key = "item_<id>", client = locks, wait = "60s")]
async fn increment(
    locks: LockClient,
    id: u64,
    mut conn: MultiplexedConnection,
) -> Result<(), AppError> {
    let value: u64 = conn.get::<_, Option<u64>>("counter").await?.unwrap_or(0);
    tokio::task::yield_now().await;
    let () = conn.set("counter", value + 1).await?;
    Ok(())
}

/// Two clients × 16 tasks, 500 calls on one id: the non-atomic counter ends exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_id_serializes_across_clients() {
    const CALLS: usize = 500;
    let server = RedisServer::start();
    let conn = server.conn().await;
    let clients = [client(&server.url()), client(&server.url())];
    let issued = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for locks in &clients {
        for _ in 0..16 {
            let (locks, conn, issued) = (locks.clone(), conn.clone(), Arc::clone(&issued));
            tasks.push(tokio::spawn(async move {
                while issued.fetch_add(1, Ordering::SeqCst) < CALLS {
                    increment(locks.clone(), 7, conn.clone())
                        .await
                        .expect("locked increment");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task");
    }
    let mut conn = conn;
    let counter: u64 = conn.get("counter").await.unwrap();
    assert_eq!(counter, CALLS as u64, "lost updates: calls overlapped");
    assert!(!exists(&mut conn, &lock_key("item_7")).await, "released");
}

/// Holds `pair_<id>` and checks, at a barrier both calls reach, that both keys are in Redis.
#[distributed_lock(key = "pair_<id>", client = locks)]
async fn hold_at_barrier(
    locks: &LockClient,
    id: u64,
    barrier: &Barrier,
    mut conn: MultiplexedConnection,
) -> Result<bool, AppError> {
    tokio::time::timeout(GENEROUS, barrier.wait())
        .await
        .expect("both calls are inside their bodies at once");
    let both = exists(&mut conn, &lock_key("pair_1")).await
        && exists(&mut conn, &lock_key("pair_2")).await;
    // Neither leaves before both have looked.
    tokio::time::timeout(GENEROUS, barrier.wait())
        .await
        .expect("second barrier");
    Ok(both)
}

/// Different ids do not exclude each other: both locks are in Redis at the same moment.
#[tokio::test]
async fn different_ids_hold_their_locks_at_the_same_time() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = client(&server.url());
    let barrier = Barrier::new(2);
    let (a, b) = tokio::join!(
        hold_at_barrier(&locks, 1, &barrier, conn.clone()),
        hold_at_barrier(&locks, 2, &barrier, conn.clone()),
    );
    assert!(a.expect("id 1"), "both keys exist while both bodies run");
    assert!(b.expect("id 2"), "both keys exist while both bodies run");
}

#[distributed_lock(key = "nest_<id>", client = locks)]
async fn nest_outer(locks: &LockClient, id: u64) -> Result<(u64, bool), AppError> {
    let token = lock_core::current_lock().expect("held").fencing_token();
    let inner = nest_middle(locks, id).await?;
    Ok((token, inner.0 == token && inner.1))
}

#[distributed_lock(key = "nest_<id>", client = locks)]
async fn nest_middle(locks: &LockClient, id: u64) -> Result<(u64, bool), AppError> {
    let token = lock_core::current_lock().expect("held").fencing_token();
    let inner = nest_inner(locks, id).await?;
    Ok((token, inner == token))
}

#[distributed_lock(key = "nest_<id>", client = locks)]
async fn nest_inner(locks: &LockClient, id: u64) -> Result<u64, AppError> {
    // Another owner (a spawned task starts outside this call chain's scope) finds it busy.
    let other = locks.clone();
    let busy = tokio::spawn(async move { try_once(&other, id).await })
        .await
        .expect("other owner task");
    assert!(
        matches!(busy, Err(AppError::Lock(ref e)) if e.is_wait_timeout()),
        "another owner must wait: {busy:?}"
    );
    Ok(lock_core::current_lock().expect("held").fencing_token())
}

#[distributed_lock(key = "nest_<id>", client = locks, wait = "0s")]
async fn try_once(locks: &LockClient, id: u64) -> Result<(), AppError> {
    Ok(())
}

/// Locked fns calling each other on one key (depth 3) re-enter with one fencing token; a
/// different owner waits meanwhile and gets the lock afterwards.
#[tokio::test]
async fn nested_calls_on_one_key_reenter() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let (token, same) = tokio::time::timeout(GENEROUS, nest_outer(&locks, 3))
        .await
        .expect("depth 3 completes without deadlock")
        .expect("nested calls");
    assert!(token > 0);
    assert!(same, "all levels see the same hold and fencing token");
    wait_gone(&mut conn, &lock_key("nest_3"), GENEROUS).await;
    try_once(&locks, 3)
        .await
        .expect("free after the outermost call");
}

/// A chain of locked calls on `chain_<id>` that another owner waits behind: what happened,
/// in order, and checks that only Redis can answer.
struct Chain {
    conn: MultiplexedConnection,
    /// The chain's client id, the prefix of its owner ids in Redis.
    client_id: String,
    events: Mutex<Vec<&'static str>>,
    /// The innermost body runs.
    holding: Notify,
    /// Lets the innermost body return.
    go: Notify,
}

impl Chain {
    fn event(&self, event: &'static str) {
        self.events.lock().unwrap().push(event);
    }

    /// After a nested call returned: the lock is still the chain's alone in Redis, and the
    /// other owner is still queued. A nested return that released in Redis would have
    /// handed the lock to the waiter in the same script.
    async fn still_held(&self, name: &str, after: &str) {
        let mut conn = self.conn.clone();
        let mut owners: Vec<String> = conn.hkeys(lock_key(name)).await.unwrap();
        // The hash's other field is the holder record, not an owner.
        owners.retain(|field| field != "distlock:holder");
        assert!(
            owners.len() == 1 && owners[0].starts_with(&self.client_id),
            "{after}: owners {owners:?}, not the chain's ({})",
            self.client_id
        );
        let queued = queued(&mut conn, &queue_key(name)).await;
        assert_eq!(queued, 1, "{after}: the other owner still waits");
    }
}

#[distributed_lock(key = "chain_<id>", client = locks)]
async fn chain_outer(locks: &LockClient, id: u64, chain: &Chain) -> Result<(), AppError> {
    chain_middle(locks, id, chain).await?;
    chain
        .still_held(&format!("chain_{id}"), "middle returned")
        .await;
    chain.event("outer body ends");
    Ok(())
}

#[distributed_lock(key = "chain_<id>", client = locks)]
async fn chain_middle(locks: &LockClient, id: u64, chain: &Chain) -> Result<(), AppError> {
    chain_inner(locks, id, chain).await?;
    chain
        .still_held(&format!("chain_{id}"), "inner returned")
        .await;
    chain.event("inner returned");
    Ok(())
}

#[distributed_lock(key = "chain_<id>", client = locks)]
async fn chain_inner(locks: &LockClient, id: u64, chain: &Chain) -> Result<(), AppError> {
    chain.holding.notify_one();
    chain.go.notified().await;
    Ok(())
}

/// The other owner: a real wait, long enough for the whole chain.
#[distributed_lock(key = "chain_<id>", client = locks, wait = "10s")]
async fn wait_for_chain(locks: LockClient, id: u64, chain: Arc<Chain>) -> Result<(), AppError> {
    chain.event("other owner acquires");
    Ok(())
}

/// A different owner waiting (not trying once) on a key that a nested chain of locked calls
/// holds is queued all along and gets the lock only once the outermost body has ended:
/// the inner returns leave the lock in Redis with the chain.
#[tokio::test]
async fn different_owner_waits_for_the_outermost_call() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (locks, other) = (client(&server.url()), client(&server.url()));
    let chain = Arc::new(Chain {
        conn: conn.clone(),
        client_id: locks.id().to_owned(),
        events: Mutex::default(),
        holding: Notify::new(),
        go: Notify::new(),
    });
    let outer = tokio::spawn({
        let chain = Arc::clone(&chain);
        async move { chain_outer(&locks, 5, &chain).await }
    });
    tokio::time::timeout(GENEROUS, chain.holding.notified())
        .await
        .expect("the chain reaches depth 3");
    let waiter = tokio::spawn(wait_for_chain(other, 5, Arc::clone(&chain)));
    wait_until("the other owner is queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, &queue_key("chain_5")).await == 1 }
    })
    .await;
    chain.go.notify_one();

    tokio::time::timeout(GENEROUS, outer)
        .await
        .expect("the chain completes")
        .expect("task")
        .expect("chain");
    tokio::time::timeout(GENEROUS, waiter)
        .await
        .expect("the other owner acquires once the chain is done")
        .expect("task")
        .expect("other owner");
    assert_eq!(
        *chain.events.lock().unwrap(),
        ["inner returned", "outer body ends", "other owner acquires"]
    );
    wait_gone(&mut conn, &lock_key("chain_5"), GENEROUS).await;
}

/// Signals that the body started, then waits for `go`; records how it ended.
#[derive(Default)]
struct Probe {
    completed: AtomicBool,
    dropped: AtomicBool,
    /// The body saw, before completing, that its lock was lost.
    saw_loss: AtomicBool,
}

struct DropFlag<'a>(&'a AtomicBool);

impl Drop for DropFlag<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[distributed_lock(key = "lost_<name>", client = locks)]
async fn abortable(
    locks: LockClient,
    name: &'static str,
    started: oneshot::Sender<()>,
    go: Arc<Notify>,
    probe: Arc<Probe>,
) -> Result<(), AppError> {
    let _flag = DropFlag(&probe.dropped);
    let _ = started.send(());
    go.notified().await;
    probe.completed.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "lost_<name>", client = locks, on_lost = "continue")]
async fn continuing(
    locks: LockClient,
    name: &'static str,
    started: oneshot::Sender<()>,
    go: Arc<Notify>,
    probe: Arc<Probe>,
) -> Result<(), AppError> {
    let _flag = DropFlag(&probe.dropped);
    let _ = started.send(());
    go.notified().await;
    // From inside the body: re-entering the lock fails with the lost error once the loss
    // was detected (before, it re-enters).
    let locks = &locks;
    wait_until("the body sees its lock lost", GENEROUS, || async move {
        match reenter(locks, name).await {
            Ok(()) => false,
            Err(e) => {
                let e = e.lock();
                assert!(e.is_lost(), "{e}");
                true
            }
        }
    })
    .await;
    probe.saw_loss.store(true, Ordering::SeqCst);
    probe.completed.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "lost_<name>", client = locks, wait = "0s")]
async fn reenter(locks: &LockClient, name: &str) -> Result<(), AppError> {
    Ok(())
}

/// The keys deleted externally while both bodies await: with `abort` the body is dropped at
/// its await and the fn returns the lost error; with `continue` the body runs on, sees from
/// inside that its lock is lost, and completes.
#[tokio::test]
async fn lost_lock_aborts_or_continues() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_secs(3))
        .build()
        .unwrap();
    let go = Arc::new(Notify::new());
    let (abort_probe, continue_probe) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
    let (abort_started, abort_ready) = oneshot::channel();
    let (continue_started, continue_ready) = oneshot::channel();
    let abort_call = tokio::spawn(abortable(
        locks.clone(),
        "a",
        abort_started,
        Arc::clone(&go),
        Arc::clone(&abort_probe),
    ));
    let continue_call = tokio::spawn(continuing(
        locks.clone(),
        "c",
        continue_started,
        Arc::clone(&go),
        Arc::clone(&continue_probe),
    ));
    abort_ready.await.expect("abort body started");
    continue_ready.await.expect("continue body started");
    let deleted: u32 = conn
        .del(&[lock_key("lost_a"), lock_key("lost_c")])
        .await
        .unwrap();
    assert_eq!(deleted, 2);

    let result = tokio::time::timeout(GENEROUS, abort_call)
        .await
        .expect("the abort call ends once the loss is seen")
        .expect("task");
    let err = result.expect_err("lost").lock();
    assert!(err.is_lost(), "{err}");
    assert!(abort_probe.dropped.load(Ordering::SeqCst), "body dropped");
    assert!(
        !abort_probe.completed.load(Ordering::SeqCst),
        "body stopped at its await"
    );

    assert!(
        !continue_call.is_finished(),
        "continue keeps running after the loss"
    );
    go.notify_waiters();
    tokio::time::timeout(GENEROUS, continue_call)
        .await
        .expect("continue call ends")
        .expect("task")
        .expect("continue completes despite the loss");
    assert!(continue_probe.completed.load(Ordering::SeqCst));
    assert!(
        continue_probe.saw_loss.load(Ordering::SeqCst),
        "the loss was detected while the body ran"
    );
}

#[distributed_lock(key = "busy_<id>", client = locks, wait = "200ms")]
async fn short_wait(locks: &LockClient, id: u64) -> Result<(), AppError> {
    Ok(())
}

/// A lock held elsewhere for longer than `wait` → the typed wait-timeout error.
#[tokio::test]
async fn wait_timeout_is_a_typed_error() {
    let server = RedisServer::start();
    let holder = client(&server.url());
    let guard = holder.lock("busy_1").await.expect("holder acquires");
    let locks = client(&server.url());
    let err = short_wait(&locks, 1).await.expect_err("busy").lock();
    assert!(err.is_wait_timeout(), "{err}");
    assert_eq!(
        err.name().map(ToString::to_string).as_deref(),
        Some("busy_1")
    );
    guard.release().await.expect("release");
    short_wait(&locks, 1).await.expect("free now");
}

/// Redis down → the unavailable error, not a wait timeout.
#[tokio::test]
async fn redis_down_is_unavailable() {
    let mut server = RedisServer::start();
    let locks = builder(&server.url())
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    server.kill();
    let result = tokio::time::timeout(GENEROUS, short_wait(&locks, 2))
        .await
        .expect("fails in bounded time");
    let err = result.expect_err("redis is down").lock();
    assert!(err.is_unavailable(), "{err}");
}

/// How soon a panic or a cancellation must release the lock (the bound).
const RELEASE_BOUND: Duration = Duration::from_secs(1);

#[distributed_lock(key = "crash_<id>", client = locks)]
async fn panics(
    locks: LockClient,
    id: u64,
    started: oneshot::Sender<()>,
    panicked_at: Arc<OnceLock<Instant>>,
) -> Result<(), AppError> {
    let _ = started.send(());
    tokio::task::yield_now().await;
    panicked_at.set(Instant::now()).unwrap();
    panic!("boom in the body");
}

/// A panic in the body releases the lock: the key is gone within 1 s of the panic.
#[tokio::test]
async fn panic_in_body_releases() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let (started, ready) = oneshot::channel();
    let panicked_at = Arc::new(OnceLock::new());
    let call = tokio::spawn(panics(locks.clone(), 1, started, Arc::clone(&panicked_at)));
    ready.await.expect("body started");
    assert!(
        exists(&mut conn, &lock_key("crash_1")).await,
        "held in the body"
    );
    let joined = call.await;
    // The clock starts once the task has unwound (its guard dropped): before that the panic
    // hook prints the backtrace, which on a busy machine takes longer than the bound itself.
    let unwound = Instant::now();
    assert!(joined.expect_err("panicked").is_panic());
    assert!(panicked_at.get().is_some(), "the body panicked");
    wait_gone(&mut conn, &lock_key("crash_1"), GENEROUS).await;
    let took = unwound.elapsed();
    assert!(
        took < RELEASE_BOUND,
        "released {took:?} after the panic unwound"
    );
}

#[distributed_lock(key = "cancel_<id>", client = locks)]
async fn never_ends(
    locks: LockClient,
    id: u64,
    started: oneshot::Sender<()>,
) -> Result<(), AppError> {
    let _ = started.send(());
    std::future::pending::<()>().await;
    Ok(())
}

/// Cancelling the call (dropping its future) releases the lock: the key is gone within 1 s.
#[tokio::test]
async fn cancelled_call_releases() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let (started, ready) = oneshot::channel();
    let call = tokio::spawn(never_ends(locks.clone(), 1, started));
    ready.await.expect("body started");
    assert!(
        exists(&mut conn, &lock_key("cancel_1")).await,
        "held in the body"
    );
    let cancelled_at = Instant::now();
    call.abort();
    assert!(call.await.expect_err("cancelled").is_cancelled());
    wait_gone(&mut conn, &lock_key("cancel_1"), GENEROUS).await;
    let took = cancelled_at.elapsed();
    assert!(
        took < RELEASE_BOUND,
        "released {took:?} after the cancellation"
    );
}

#[distributed_lock(key = "pair_<a>:<b>", client = locks, lease = "20s")]
async fn encoded(
    locks: &LockClient,
    a: &str,
    b: String,
    mut conn: MultiplexedConnection,
) -> Result<(String, i64), AppError> {
    let name = lock_core::current_lock().expect("held").name().to_string();
    // The Redis key escapes the name's `%` once more (see `LockName`).
    let ttl = pttl(&mut conn, &lock_key(&name.replace('%', "%25"))).await;
    Ok((name, ttl))
}

/// Values are percent-encoded into the name, and an explicit lease is set as written.
#[tokio::test]
async fn key_values_are_encoded_and_lease_applies() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = client(&server.url());
    let (one, ttl) = encoded(&locks, "x:y", "z".into(), conn.clone())
        .await
        .unwrap();
    let (two, _) = encoded(&locks, "x", "y:z".into(), conn.clone())
        .await
        .unwrap();
    assert_eq!(one, "pair_x%3Ay:z");
    assert_eq!(two, "pair_x:y%3Az");
    assert!(
        ttl > 10_000 && ttl <= 20_000,
        "lease = 20s gives the key's TTL: {ttl}"
    );
}

struct Order {
    id: u64,
    #[allow(dead_code)] // only for the pattern's `..` to skip
    note: &'static str,
}

/// `<<` is a literal `<`; a struct pattern's binding gives the value.
#[distributed_lock(key = "<<raw>:order_<id>", client = locks)]
async fn raw_order(locks: &LockClient, Order { id, .. }: Order) -> Result<String, AppError> {
    Ok(lock_core::current_lock().expect("held").name().to_string())
}

/// The name renders `<<` as `<` and takes `id` out of the struct pattern.
#[tokio::test]
async fn escapes_and_struct_patterns_render() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let name = raw_order(&locks, Order { id: 7, note: "x" }).await.unwrap();
    assert_eq!(name, "<raw>:order_7");
}

struct Account {
    tenant: String,
    locks: LockClient,
    balance: AtomicU64,
}

impl Account {
    #[distributed_lock(key = "account_<self.tenant>", client = self.locks)]
    async fn deposit(self: Arc<Self>, amount: u64) -> Result<String, AppError> {
        self.balance.fetch_add(amount, Ordering::SeqCst);
        Ok(lock_core::current_lock().expect("held").name().to_string())
    }

    #[distributed_lock(key = "account_<self.tenant>", client = self.locks)]
    async fn audit(&mut self) -> Result<u64, AppError> {
        Ok(*self.balance.get_mut())
    }
}

/// Methods with `self: Arc<Self>` and `&mut self` build keys from `self` fields.
#[tokio::test]
async fn methods_take_keys_from_self() {
    let server = RedisServer::start();
    let account = Arc::new(Account {
        tenant: "acme".into(),
        locks: client(&server.url()),
        balance: AtomicU64::new(0),
    });
    let name = Arc::clone(&account).deposit(5).await.unwrap();
    assert_eq!(name, "account_acme");
    let mut account = Arc::into_inner(account).expect("one owner");
    assert_eq!(account.audit().await.unwrap(), 5);
}

/// Regression: nested locked calls once built a 265 kB future in debug builds and overflowed
/// the test thread's stack; the lock's work is boxed, so each call's future stays small.
#[tokio::test]
async fn locked_fn_futures_stay_small() {
    let locks = LockClient::new("redis://127.0.0.1:1").unwrap();
    let outer = nest_outer(&locks, 1);
    assert!(
        std::mem::size_of_val(&outer) < 1024,
        "{}",
        std::mem::size_of_val(&outer)
    );
}
