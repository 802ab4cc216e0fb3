//! The lock family: `mode = "read" | "write" | "exclusive"`, `keys = [...]` (a multi-lock)
//! and `permits = n` (a semaphore), with the other options.
use lock_core::{distributed_lock, LockClient, LockError};

#[distributed_lock(key = "item_<id>", mode = "read", client = locks)]
async fn read(locks: &LockClient, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "item_<id>", mode = "write", wait = "2s", client = locks)]
async fn write(locks: &LockClient, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "item_<id>", mode = "exclusive", client = locks)]
async fn exclusive(locks: &LockClient, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

struct Transfer {
    from: u64,
    to: u64,
}

#[distributed_lock(keys = ["acct_<t.from>", "acct_<t.to>"], lease = "10s", client = locks)]
async fn transfer(locks: &LockClient, t: Transfer) -> Result<u64, LockError> {
    Ok(t.from + t.to)
}

#[distributed_lock(keys = ["acct_<from>", "ledger",], on_lost = "continue", client = locks)]
async fn with_a_constant_name(locks: &LockClient, from: u64) -> Result<u64, LockError> {
    Ok(from)
}

const EXPORTS: u32 = 3;

#[distributed_lock(key = "export_<tenant>", permits = 3, client = locks)]
async fn export(locks: &LockClient, tenant: &str) -> Result<usize, LockError> {
    Ok(tenant.len())
}

#[distributed_lock(key = "export_<tenant>", permits = EXPORTS, wait = "0s", client = locks)]
async fn export_with_a_const(locks: &LockClient, tenant: String) -> Result<String, LockError> {
    Ok(tenant)
}

fn send<T: Send>(_: T) {}

fn calls(locks: &LockClient) {
    send(read(locks, 1));
    send(write(locks, 1));
    send(exclusive(locks, 1));
    send(transfer(locks, Transfer { from: 1, to: 2 }));
    send(with_a_constant_name(locks, 1));
    send(export(locks, "t"));
    send(export_with_a_const(locks, "t".to_owned()));
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    let _ = calls;
}
