//! `#[distributed_lock]` on plain async functions: the default client, key templates, the
//! fencing token, reentrant nested calls and the typed errors.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example macro_basic
//! ```

use distlock_examples::ExampleRedis;
use lock_core::{distributed_lock, LockClient, LockError};

/// The application's error: lock failures arrive through `From<LockError>`.
#[derive(Debug)]
enum ShopError {
    Lock(LockError),
    SoldOut(u64),
}

impl From<LockError> for ShopError {
    fn from(e: LockError) -> Self {
        ShopError::Lock(e)
    }
}

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShopError::Lock(e) => write!(f, "{e}"),
            ShopError::SoldOut(id) => write!(f, "item {id} is sold out"),
        }
    }
}

impl std::error::Error for ShopError {}

/// One caller at a time per item, across every process that uses this Redis.
/// Without `client = …` the default client installed in `main` is used.
#[distributed_lock(key = "item_<id>", wait = "2s")]
async fn buy(id: u64, quantity: u32) -> Result<u64, ShopError> {
    let lock = lock_core::current_lock().expect("the body runs under the lock");
    println!(
        "buy({id}, {quantity}) holds `{}` with fencing token {}",
        lock.name(),
        lock.fencing_token()
    );
    // Nested locked call on the same key: re-enters instead of deadlocking.
    let left = check_stock(id).await?;
    if left == 0 {
        return Err(ShopError::SoldOut(id));
    }
    Ok(left - 1)
}

#[distributed_lock(key = "item_<id>")]
async fn check_stock(id: u64) -> Result<u64, ShopError> {
    let token = lock_core::current_lock().expect("held").fencing_token();
    println!("  check_stock({id}) re-entered with the same token {token}");
    Ok(3)
}

/// A field path and a tuple pattern in the key, an explicit lease (no watchdog), one try.
#[distributed_lock(key = "order_<order.shop>:<line>", lease = "10s", wait = "0s")]
async fn ship(order: Order, (line, _qty): (u32, u32)) -> Result<String, LockError> {
    Ok(format!("shipped line {line} of shop {}", order.shop))
}

struct Order {
    shop: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = ExampleRedis::from_env_or_start()?;
    lock_core::set_default_client(LockClient::new(redis.url())?)
        .map_err(|_| "a default client was already installed")?;

    println!("left: {}", buy(7, 1).await?);

    let order = Order { shop: "a:b".into() };
    println!("{}", ship(order, (2, 5)).await?);

    // While another owner holds the item, `wait = "2s"` ends in a typed error.
    let other = LockClient::new(redis.url())?;
    let guard = other.lock("item_7").await?;
    let started = std::time::Instant::now();
    match buy(7, 1).await {
        Err(ShopError::Lock(e)) if e.is_wait_timeout() => {
            println!("busy after {:?}: {e}", started.elapsed());
        }
        other => println!("unexpected: {other:?}"),
    }
    guard.release().await?;
    println!("left: {}", buy(7, 1).await?);
    Ok(())
}
