use lock_core::{distributed_lock, LockClient, LockError};

// A `Mutex` has a `lock` method of its own; the client must be a `LockClient` (or deref to
// one), and the error is on the expression.
struct App {
    locks: tokio::sync::Mutex<LockClient>,
}

#[distributed_lock(key = "item_<id>", client = app.locks)]
async fn buy(app: &App, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
