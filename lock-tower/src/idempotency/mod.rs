//! The idempotency-key layer: [`IdempotencyLayer`], built on lock-core's idempotency
//! protocol ([`lock_core::idempotency::Idempotency`]).
//!
//! The lock stops two requests for item 7 from running *at the same time*; it does not stop
//! a client that timed out and retried from buying item 7 *twice*. [`IdempotencyLayer`]
//! does, for every request that completes: the first request with an `Idempotency-Key` runs
//! and its response is stored; a duplicate while it runs is told to retry later; a later
//! duplicate gets the stored response; the same key with another request is refused. A
//! request that does not complete (its client dropped it, a server error) stores nothing,
//! and its retry runs the handler again: fence the handler's effects with the key's token
//! (below) to make those happen once too.
//!
//! ```no_run
//! use axum::{routing::post, Router};
//! use lock_tower::idempotency::IdempotencyLayer;
//!
//! # async fn charge() -> &'static str { "charged" }
//! # #[cfg(feature = "axum")] // axum's body is a `RebuildBody` with the `axum` feature
//! # fn demo(client: lock_core::LockClient) {
//! let idempotency = IdempotencyLayer::builder(client)
//!     .require_key()
//!     // Keys are the caller's own: two tenants' `k1` never meet.
//!     .caller(|req| Some(req.headers.get("x-tenant")?.to_str().ok()?.to_owned()))
//!     .build();
//! let app: Router = Router::new()
//!     .route("/charges", post(charge))
//!     .route_layer(idempotency);
//! # let _ = app; }
//! ```
//!
//! On tonic, `Server::builder().layer(IdempotencyLayer::new(client))` with lock-tower's
//! `tonic` feature (which lets the layer rebuild tonic's request body, [`RebuildBody`]):
//! the key is the `idempotency-key` metadata.
//!
//! | request | HTTP | gRPC |
//! | --- | --- | --- |
//! | another method (by default only `POST` and `PATCH`), or no key where none is [required](IdempotencyLayerBuilder::require_key) | passes through | passes through |
//! | key missing (when required), empty, repeated, too long, not visible ASCII; or no [caller](IdempotencyLayerBuilder::caller) | `400` | `INVALID_ARGUMENT` |
//! | body above [`max_request_body`](IdempotencyLayerBuilder::max_request_body) | `413` | `RESOURCE_EXHAUSTED` |
//! | first with its key | runs; response stored | runs; message and trailers stored |
//! | while one with its key runs | `409` + `Retry-After` | `ABORTED` |
//! | after one with its key completed | the stored response + `idempotency-replayed: true` | the stored message, same metadata marker |
//! | same key, another [fingerprint](IdempotencyLayerBuilder::fingerprint) (method, path and query, body by default) | `422` | `FAILED_PRECONDITION` |
//! | after one whose response was above [`max_response_body`](IdempotencyLayerBuilder::max_response_body) | [`too_large_status`](IdempotencyLayerBuilder::too_large_status), `409` by default, no `Retry-After`, marked replayed | `ALREADY_EXISTS` |
//! | key lost while the handler ran | `503` (the handler is dropped) | `ABORTED` |
//! | Redis unavailable | `503` + `Retry-After: 5`, as the lock layer | `UNAVAILABLE` |
//! | on a Redlock client (records need one Redis), or a record this version cannot read | `500` | `INTERNAL` |
//!
//! What is stored: final answers only — HTTP statuses below 500 other than 408, 409, 425
//! and 429; gRPC `OK` and the client's errors (`INVALID_ARGUMENT`, `NOT_FOUND`,
//! `ALREADY_EXISTS`, `PERMISSION_DENIED`, `FAILED_PRECONDITION`, `OUT_OF_RANGE`,
//! `UNIMPLEMENTED`, `UNAUTHENTICATED`). A server error, a "try again", a dropped connection
//! (the handler is cancelled) and a lost key store nothing, and the key is free for a retry
//! at once — except that a request dropped after its store was sent may still be stored (and
//! is then replayed: the answer of a completed run). The status, `content-type` (and the headers given to
//! [`keep_header`](IdempotencyLayerBuilder::keep_header); gRPC's status headers and
//! trailers) and the body are stored for the [retention](IdempotencyLayerBuilder::retention)
//! (24 h by default), in the same Redis function call that releases the key, and only while the
//! request's hold is current (its owner and fencing token): a request that lost its key to a
//! retry can never store over the retry's answer. Every key the layer writes has a TTL (the
//! in-flight lock its lease, the record the retention), and its answers never name a holder,
//! host or Redis address.
//!
//! While a request runs, its key is a lock like any other: renewed by the watchdog, fenced
//! (the handler finds its [`LockInfo`](lock_core::LockInfo) in the extensions: guard your effects with its
//! fencing token), and the handler is dropped when it is lost. What "exactly once" then
//! means is in SAFETY.md. A first request costs 4 Redis round trips (read the record, take
//! the key, read the record again, store and release), a replay 1. Code that is not a tower
//! service (queue consumers, jobs) has the same protocol in lock-core:
//! `client.idempotent(key, fingerprint, async { … })` (its `serde` feature).
//!
//! # The parts
//!
//! `config` and `key` decide what a request is (skipped, refused, or its key's lock name);
//! `steps` holds the two Redis steps around the inner service (begin, store-or-release),
//! `future` the state machine that runs them, `body` the bodies and `record` the layout of
//! a stored response.

pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod config;
pub(crate) mod future;
pub(crate) mod key;
pub(crate) mod layer;
pub(crate) mod record;
pub(crate) mod service;
pub(crate) mod steps;

pub use answer::REPLAYED_HEADER;
pub use body::{IdempotencyBody, RebuildBody};
pub use future::IdempotencyFuture;
pub use layer::{IdempotencyLayer, IdempotencyLayerBuilder};
pub use service::Idempotent;
