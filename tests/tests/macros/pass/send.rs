//! The generated future is `Send` (and `'static` for owned arguments) whenever the body's is.
use std::future::Future;
use std::sync::Arc;

use lock_core::{distributed_lock, LockError};

fn assert_send<F: Future + Send>(_: F) {}
fn assert_static<F: Future + Send + 'static>(_: F) {}

#[derive(Clone)]
struct App {
    stock: Arc<tokio::sync::Mutex<u64>>,
}

#[distributed_lock(key = "item_<id>")]
async fn buy(id: u64, app: App) -> Result<u64, LockError> {
    let mut stock = app.stock.lock().await;
    *stock -= 1;
    tokio::task::yield_now().await;
    Ok(*stock + id)
}

#[distributed_lock(key = "item_<id>")]
async fn borrow(id: &str, app: &App) -> Result<u64, LockError> {
    let stock = app.stock.lock().await;
    Ok(*stock + id.len() as u64)
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    let app = App {
        stock: Arc::default(),
    };
    assert_send(borrow("x", &app));
    assert_static(buy(1, app.clone()));
    let _spawn = move || tokio::spawn(buy(2, app));
}
