//! An annotated function used directly as an axum handler with extractor patterns.
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use lock_core::{distributed_lock, LockClient, LockError};

#[derive(Clone)]
struct App {
    locks: LockClient,
    region: String,
}

struct ApiError(LockError);

impl From<LockError> for ApiError {
    fn from(e: LockError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (StatusCode::CONFLICT, self.0.to_string()).into_response()
    }
}

#[distributed_lock(key = "<app.region>:item_<id>", client = app.locks, wait = "2s")]
async fn buy(State(app): State<App>, Path(id): Path<u64>) -> Result<String, ApiError> {
    Ok(format!("bought {id}"))
}

#[distributed_lock(key = "shop_<shop>:item_<item>", client = app.locks)]
async fn restock(
    Path((shop, item)): Path<(u32, u32)>,
    State(app): State<App>,
) -> Result<StatusCode, ApiError> {
    let _ = (shop, item);
    Ok(StatusCode::NO_CONTENT)
}

fn router(app: App) -> Router {
    Router::new()
        .route("/items/{id}/buy", post(buy))
        .route("/shops/{shop}/items/{item}", get(restock))
        .with_state(app)
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    let _ = router;
}
