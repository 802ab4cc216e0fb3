//! `client = …` takes a `LockClient`, a reference, or anything that derefs to one, checked as
//! such: a wrapper's own `lock` method or field is never called instead.
use std::ops::Deref;
use std::sync::Arc;

use lock_core::{distributed_lock, LockClient, LockError};

/// Derefs to a `LockClient`, and has a `lock` field and a `lock` method of its own.
struct Locks {
    client: LockClient,
    lock: u64,
}

impl Locks {
    fn lock(&self) -> u64 {
        self.lock
    }
}

impl Deref for Locks {
    type Target = LockClient;

    fn deref(&self) -> &LockClient {
        &self.client
    }
}

#[distributed_lock(key = "wrapped_<id>", client = locks)]
async fn wrapped(locks: &Locks, id: u64) -> Result<u64, LockError> {
    Ok(id + locks.lock() + locks.lock)
}

#[distributed_lock(key = "shared_<id>", client = locks)]
async fn shared(locks: Arc<LockClient>, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "picked_<id>", client = if id.is_multiple_of(2) { even } else { &*odd })]
async fn picked(even: &LockClient, odd: Box<LockClient>, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "owned_<id>", client = LockClient::new("redis://127.0.0.1").unwrap())]
async fn owned(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn calls(client: LockClient) {
    let locks = Locks {
        client: client.clone(),
        lock: 1,
    };
    drop(wrapped(&locks, 1));
    drop(shared(Arc::new(client.clone()), 1));
    drop(picked(&client, Box::new(client.clone()), 1));
    drop(owned(1));
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    let _ = calls;
}
