//! `map_err`: error types that cannot implement `From<LockError>` (the orphan rule).
use axum::http::StatusCode;
use lock_core::{distributed_lock, LockError};

fn status(error: LockError) -> StatusCode {
    if error.is_wait_timeout() {
        StatusCode::CONFLICT
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

#[distributed_lock(key = "item_<id>", map_err = status)]
async fn with_a_path(id: u64) -> Result<u64, StatusCode> {
    Ok(id)
}

#[distributed_lock(key = "item_<id>", map_err = |e| e.to_string())]
async fn with_a_closure(id: u64) -> Result<u64, String> {
    Ok(id)
}

struct Api;

impl Api {
    fn from_lock(error: LockError) -> Box<dyn std::error::Error + Send + Sync> {
        Box::new(error)
    }

    #[distributed_lock(key = "api_<id>", map_err = Self::from_lock)]
    async fn with_an_associated_fn(
        &self,
        id: u64,
    ) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
        Ok(id)
    }
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    drop(with_a_path(1));
    drop(with_a_closure(1));
    drop(Api.with_an_associated_fn(1));
}
