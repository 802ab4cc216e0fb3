//! The expansion adds no warnings to the user's code: one-line bodies, inner attributes,
//! `Result` aliases of any name.
#![deny(warnings)]

use lock_core::{distributed_lock, LockError};

type Response<T> = Result<T, LockError>;

#[distributed_lock(key = "one_<id>")]
async fn one_line(id: u64) -> Response<u64> {
    Ok(id)
}

#[distributed_lock(key = "inner_<id>")]
async fn inner_attribute(id: u64) -> Result<u64, LockError> {
    #![allow(unused_variables)]
    let unused = 1;
    Ok(id)
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    drop(one_line(1));
    drop(inner_attribute(1));
}
