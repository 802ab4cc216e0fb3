//! Fencing a Postgres row with the lock's token: an axum service whose `PUT
//! /items/{id}/price` runs under `lock-tower`'s layer and writes the row only while no later
//! holder of `item_<id>` has written it (`examples/axum_fenced_postgres.rs` serves it; the
//! tests run it against a private Postgres).
//!
//! The pattern to copy is [`SET_PRICE`]: the row keeps the highest token that wrote it
//! (`fence`), and an update carries its own token and lands only if that token is not below
//! it. A hold that outlived its lease (a pause, a slow dependency) then writes nothing: 0
//! rows, answered `409`.
//!
//! Client: `tokio-postgres`, for a lighter build than sqlx and no macros that need a live
//! database at compile time.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Extension, Json, Router};
use lock_core::{LockClient, LockInfo, OnLost};
use lock_tower::lock::DistributedLockLayer;
use lock_tower::BuildError;
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

/// The table: each row keeps the highest fencing token that wrote it.
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS items (
    id bigint PRIMARY KEY,
    price_cents bigint NOT NULL,
    fence bigint NOT NULL DEFAULT 0
)";

/// The fenced write (`$1` the item, `$2` the price, `$3` the hold's fencing token): it lands
/// only if no later hold has written the row. `<=`, not `<`: the same hold may write twice.
pub const SET_PRICE: &str =
    "UPDATE items SET price_cents = $2, fence = $3 WHERE id = $1 AND fence <= $3";

/// What a fenced write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// The row was written, and now carries this hold's token.
    Applied,
    /// 0 rows: a later hold of the lock has written the row; this hold is stale and wrote
    /// nothing.
    Stale,
    /// 0 rows: there is no such item.
    Missing,
}

/// A fencing token as Postgres' `bigint`.
///
/// # Panics
/// Never in practice: tokens are the Redis clock in microseconds, below `i64::MAX` until
/// the year 294,000.
pub fn fence(token: u64) -> i64 {
    i64::try_from(token).expect("a fencing token fits in a bigint")
}

/// Sets item `id`'s price under the fencing `token` of the hold the caller runs under.
///
/// # Errors
/// When Postgres fails the statement (unreachable, for instance).
pub async fn set_price(
    db: &Client,
    id: i64,
    cents: i64,
    token: u64,
) -> Result<Write, tokio_postgres::Error> {
    if db.execute(SET_PRICE, &[&id, &cents, &fence(token)]).await? == 1 {
        return Ok(Write::Applied);
    }
    // 0 rows: no such item, or its fence is above our token. Either way nothing was
    // written; a second look tells the caller which.
    let exists = db
        .query_opt("SELECT 1 FROM items WHERE id = $1", &[&id])
        .await?
        .is_some();
    Ok(if exists { Write::Stale } else { Write::Missing })
}

#[derive(Deserialize)]
struct PriceParams {
    cents: i64,
    /// Pause this many milliseconds between taking the lock and writing, as a slow
    /// dependency or a long GC pause would: past the layer's lease, a later request may
    /// take the lock and write first, and this write is refused.
    #[serde(default)]
    slow_ms: u64,
}

#[derive(Serialize)]
struct Item {
    item: i64,
    price_cents: i64,
    fence: i64,
}

/// A database failure: `503`, without the error's text (it names hosts and users); the
/// error goes to the service's log.
fn database_down(e: &tokio_postgres::Error) -> Response {
    eprintln!("database error: {e}");
    let body = "the database is unavailable; retry later\n";
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

/// `PUT /items/{id}/price?cents=…`: the fenced write, under the layer's `item_<id>`.
async fn put_price(
    State(db): State<Arc<Client>>,
    Path(id): Path<i64>,
    Query(params): Query<PriceParams>,
    Extension(lock): Extension<LockInfo>,
) -> Response {
    tokio::time::sleep(Duration::from_millis(params.slow_ms)).await;
    let token = lock.fencing_token();
    match set_price(&db, id, params.cents, token).await {
        Ok(Write::Applied) => Json(Item {
            item: id,
            price_cents: params.cents,
            fence: fence(token),
        })
        .into_response(),
        // Nothing was written: the client re-reads the item and decides again.
        Ok(Write::Stale) => {
            let body = format!("item {id} was changed by a later request; nothing was written\n");
            (StatusCode::CONFLICT, body).into_response()
        }
        Ok(Write::Missing) => (StatusCode::NOT_FOUND, format!("no item {id}\n")).into_response(),
        Err(e) => database_down(&e),
    }
}

/// `GET /items/{id}`: the row, with the token that last wrote it.
async fn get_item(State(db): State<Arc<Client>>, Path(id): Path<i64>) -> Response {
    let sql = "SELECT price_cents, fence FROM items WHERE id = $1";
    match db.query_opt(sql, &[&id]).await {
        Ok(Some(row)) => Json(Item {
            item: id,
            price_cents: row.get(0),
            fence: row.get(1),
        })
        .into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, format!("no item {id}\n")).into_response(),
        Err(e) => database_down(&e),
    }
}

/// The service: `PUT /items/{id}/price` under a lock per item, with an explicit `lease`
/// (the watchdog does not renew it: a request that runs longer loses its lock, and its
/// write is fenced off), and `GET /items/{id}`.
///
/// A request that loses its lock runs on ([`OnLost::Continue`]) so that the fence, not the
/// layer, is seen refusing its write. The default, [`OnLost::Abort`], also answers `503`
/// at the handler's next `.await` after a loss it notices; it cannot recall a statement
/// already on its way to the database, nor notice a loss in a process that was paused,
/// which is why the fence is needed either way.
///
/// # Errors
/// Never for this template; a [`BuildError`] names a template mistake.
pub fn router(locks: LockClient, db: Arc<Client>, lease: Duration) -> Result<Router, BuildError> {
    let lock = DistributedLockLayer::builder(locks)
        .key("item_<id:u64>")
        .lease(lease)
        .on_lost(OnLost::Continue)
        .build()?;
    Ok(Router::new()
        .route("/items/{id}/price", put(put_price).route_layer(lock))
        .route("/items/{id}", get(get_item))
        .with_state(db))
}
