//! The payment service of the `axum_payments` example, shared with the tests that run it in
//! several processes: `POST /charges` behind lock-tower's [`IdempotencyLayer`], charging an
//! account in Redis exactly once per `Idempotency-Key`.
//!
//! The handler's one effect ([`charge.lua`](self)) is fenced by the key's token: a holder
//! that was paused past its lease finds a newer holder's charge and does nothing, and a
//! retry after a cancelled attempt finds the charge that attempt made. The layer stores the
//! answer atomically with releasing the key, so later duplicates get it replayed.

pub mod client;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Extension, Json, Router};
use lock_core::{LockClient, LockInfo};
use lock_tower::idempotency::IdempotencyLayer;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

/// The header that slows a charge down by that many milliseconds (for demos and tests of
/// timeouts, pauses and crashes).
pub const DELAY_HEADER: &str = "x-delay-ms";
/// How long charges and answers are kept.
pub const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

static CHARGE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("charge.lua")));

/// A charge request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The account charged.
    pub account: String,
    /// How much, in cents.
    pub cents: u64,
}

/// The answer to a charge: what a replay answers too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The account charged.
    pub account: String,
    /// How much, in cents.
    pub cents: u64,
    /// The fencing token of the hold that charged.
    pub token: u64,
}

/// Called with a line for each event of the service (`CHARGING key=… token=…`), for
/// processes that report to a test.
pub type Events = Arc<dyn Fn(String) + Send + Sync>;

#[derive(Clone)]
struct Service {
    redis: MultiplexedConnection,
    events: Events,
}

/// The ledger of `account`: one line per charge.
pub fn ledger_key(account: &str) -> String {
    format!("payments:ledger:{account}")
}

/// The router: `POST /charges` with a JSON [`ChargeRequest`], an `Idempotency-Key` required,
/// keys scoped to the `x-client` header.
pub fn app(locks: LockClient, redis: MultiplexedConnection, events: Events) -> Router {
    let idempotency = IdempotencyLayer::builder(locks)
        .namespace("payments")
        .require_key()
        .caller(|req| Some(req.headers.get("x-client")?.to_str().ok()?.to_owned()))
        .retention(RETENTION)
        .build();
    Router::new()
        .route("/charges", post(charge))
        .route_layer(idempotency)
        .with_state(Service { redis, events })
}

async fn charge(
    State(service): State<Service>,
    Extension(key): Extension<LockInfo>,
    headers: HeaderMap,
    Json(request): Json<ChargeRequest>,
) -> Result<(StatusCode, Json<Receipt>), (StatusCode, String)> {
    let token = key.fencing_token();
    (service.events)(format!("CHARGING key={} token={token}", key.name()));
    let delay = headers
        .get(DELAY_HEADER)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .map(Duration::from_millis);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let charged: i64 = CHARGE
        .key(format!("payments:charge:{{{}}}", key.name()))
        .key(ledger_key(&request.account))
        .arg(token)
        .arg(format!("{} {} {token}", key.name(), request.cents))
        .arg(RETENTION.as_millis() as u64)
        .invoke_async(&mut service.redis.clone())
        .await
        .map_err(|_| {
            let text = "the payment store is unavailable".to_owned();
            (StatusCode::SERVICE_UNAVAILABLE, text)
        })?;
    (service.events)(format!(
        "CHARGED key={} token={token} outcome={charged}",
        key.name()
    ));
    if charged < 0 {
        let text = "superseded by a newer attempt".to_owned();
        return Err((StatusCode::SERVICE_UNAVAILABLE, text));
    }
    let receipt = Receipt {
        account: request.account,
        cents: request.cents,
        token,
    };
    Ok((StatusCode::CREATED, Json(receipt)))
}
