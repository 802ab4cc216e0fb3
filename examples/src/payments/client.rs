//! The client library of the payment service: one `POST /charges` with a timeout, and the
//! retrying charge a caller uses (same key and body on every attempt, so the service
//! charges once however many attempts reach it).

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::{ChargeRequest, Receipt, DELAY_HEADER};

/// A pooled HTTP client.
pub type Http = Client<HttpConnector, Full<Bytes>>;

/// A pooled HTTP client for the service.
pub fn http() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What one attempt got.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A response: status, whether it was a replay, `Retry-After` seconds, body.
    Response {
        /// The status.
        status: StatusCode,
        /// True for a stored response replayed.
        replayed: bool,
        /// `Retry-After`, in seconds.
        retry_after: Option<u64>,
        /// The body.
        body: Bytes,
    },
    /// No answer within the attempt's timeout (the request was dropped, as a client that
    /// gives up drops its connection).
    TimedOut,
    /// The connection failed.
    Failed,
}

/// One attempt: `POST /charges` on `addr` with `key` as caller `client`, slowed down by
/// `delay_ms` on the server when given, abandoned after `timeout`.
pub async fn attempt(
    http: &Http,
    addr: SocketAddr,
    client: &str,
    key: &str,
    charge: &ChargeRequest,
    delay_ms: Option<u64>,
    timeout: Duration,
) -> Answer {
    let body = serde_json::to_vec(charge).expect("a charge serialises");
    let mut request = Request::post(format!("http://{addr}/charges"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .header("x-client", client);
    if let Some(delay) = delay_ms {
        request = request.header(DELAY_HEADER, delay);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .expect("a valid request");
    let exchange = async {
        let response = http.request(request).await.ok()?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.ok()?.to_bytes();
        let header = |name| parts.headers.get(name)?.to_str().ok();
        Some(Answer::Response {
            status: parts.status,
            replayed: header(lock_tower::idempotency::REPLAYED_HEADER) == Some("true"),
            retry_after: header("retry-after").and_then(|v| v.parse().ok()),
            body,
        })
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Some(answer)) => answer,
        Ok(None) => Answer::Failed,
        Err(_) => Answer::TimedOut,
    }
}

/// How a caller retries.
#[derive(Clone, Copy, Debug)]
pub struct Retries {
    /// How long one attempt may take before the caller gives up on it.
    pub timeout: Duration,
    /// Attempts in all.
    pub attempts: usize,
    /// A server-side delay of the first attempt, in ms (to show a timeout).
    pub first_delay_ms: Option<u64>,
}

/// Charges with retries, as a careful caller does: the same key and body on every attempt,
/// round-robin over `addrs`; after a timeout or a `503` at once, after a `409` when
/// `Retry-After` says (at most the attempt timeout). Gives up after `retries.attempts`.
pub async fn charge(
    http: &Http,
    addrs: &[SocketAddr],
    client: &str,
    key: &str,
    charge: &ChargeRequest,
    retries: Retries,
) -> (Option<Receipt>, Vec<Answer>) {
    let Retries {
        timeout,
        attempts,
        first_delay_ms,
    } = retries;
    let mut seen = Vec::new();
    for i in 0..attempts {
        let addr = addrs[i % addrs.len()];
        let delay = if i == 0 { first_delay_ms } else { None };
        let answer = attempt(http, addr, client, key, charge, delay, timeout).await;
        seen.push(answer.clone());
        match answer {
            Answer::Response { status, body, .. } if status.is_success() => {
                return (serde_json::from_slice(&body).ok(), seen);
            }
            Answer::Response {
                status: StatusCode::CONFLICT,
                retry_after,
                ..
            } => {
                let wait = Duration::from_secs(retry_after.unwrap_or(1)).min(timeout);
                tokio::time::sleep(wait).await;
            }
            Answer::Response { status, .. } if !status.is_server_error() => return (None, seen),
            _ => {}
        }
    }
    (None, seen)
}
