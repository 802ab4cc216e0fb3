//! A misspelled field: rustc names it on the key. (A macro cannot see the struct's fields, and
//! stable rustc cannot point inside a string literal, so its own "similar name" suggestion,
//! which would replace the whole literal with `region`, is left out rather than wrong.)
use lock_core::{distributed_lock, LockError};

struct App {
    region: String,
}

#[distributed_lock(key = "<app.regionn>/item_<id>")]
async fn buy(app: &App, id: u64) -> Result<u64, LockError> {
    let _ = &app.region;
    Ok(id)
}

fn main() {}
