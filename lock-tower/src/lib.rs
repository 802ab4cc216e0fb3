//! Tower layers that take distributed locks ([`lock_core`]) per request, for axum, tonic and
//! any `http::Request` service. One folder per middleware, as in tower-http:
//!
//! | module | layer | what it does to a request |
//! | --- | --- | --- |
//! | [`lock`] | [`DistributedLockLayer`](lock::DistributedLockLayer) | runs it under one lock, named from the request: requests for the same name run one at a time across every instance that shares the Redis |
//! | [`semaphore`] | [`DistributedSemaphoreLayer`](semaphore::DistributedSemaphoreLayer) | lets at most N requests per key run at once, answering the others `429` |
//! | [`idempotency`] | [`IdempotencyLayer`](idempotency::IdempotencyLayer) | runs it once per `Idempotency-Key` and replays the stored response to duplicates |
//!
//! Each layer's types have one path, in its module, and each module is a feature of its
//! own (see below). The crate root holds what the lock and semaphore layers share: they
//! name their locks with key templates (`"item_<id:u64>"`, see [keys](lock#keys);
//! [`KeyError`], [`RequestHead`], [`BuildError`]) and answer rejections alike
//! ([answers](lock#answers); [`Rejection`], [`ResponseBody`]). A lock's own types
//! ([`LockInfo`](lock_core::LockInfo), [`OnLost`](lock_core::OnLost)) are lock-core's.
//!
//! # axum
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{extract::Path, routing::post, Extension, Router};
//! use lock_core::LockInfo;
//! use lock_tower::lock::DistributedLockLayer;
//!
//! async fn buy(Path(id): Path<u64>, Extension(lock): Extension<LockInfo>) -> String {
//!     // Runs while `item_<id>` is held; pass the fencing token to your storage.
//!     format!("bought {id} under token {}", lock.fencing_token())
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = lock_core::LockClient::new("redis://127.0.0.1:6379")?;
//! // `<id:u64>` is the `{id}` of the route axum matched (lock-tower's
//! // `axum` feature), read as `Path<u64>` reads it: `/items/07/buy` and `/items/7/buy` are one lock.
//! let lock = DistributedLockLayer::builder(client)
//!     .key("item_<id:u64>")
//!     .wait(Duration::from_secs(2))
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/items/{id}/buy", post(buy))
//!     .route_layer(lock);
//! # let _ = app; Ok(()) }
//! ```
//!
//! # tonic
//!
//! gRPC calls are HTTP/2 requests to `/<package>.<Service>/<Method>`, and metadata are
//! headers; routes select the locked methods:
//!
//! ```no_run
//! # use lock_tower::lock::DistributedLockLayer;
//! # async fn demo(client: lock_core::LockClient) -> Result<(), Box<dyn std::error::Error>> {
//! let lock = DistributedLockLayer::builder(client)
//!     .route("/orders.Orders/PlaceOrder")
//!     .key("order_<header.x-order-id:uuid>")
//!     .build()?;
//! let server = tonic::transport::Server::builder().layer(lock);
//! // server.add_service(OrdersServer::new(orders)).serve(addr).await?;
//! # let _ = server; Ok(()) }
//! ```
//!
//! The handler finds the lock's [`LockInfo`](lock_core::LockInfo) (name and fencing token) in
//! `request.extensions()`.
//!
//! # Feature flags
//!
//! One per middleware, as in tower-http:
//!
//! - `lock` (default): the [`lock`] module and the items at the root.
//! - `semaphore` (default): the [`semaphore`] module (it turns `lock` on: a permit's
//!   service and future are the lock layer's).
//! - `idempotency`: the [`idempotency`] module (and lock-core's idempotency keys).
//!
//! And for the frameworks and Redis:
//!
//! - `axum`: path placeholders (`<id:u64>`) read the route axum matched, so a layer needs
//!   no `.route(…)` of its own (see [routes](lock#routes-and-path-parameters)); and
//!   [`RebuildBody`](idempotency::RebuildBody) for axum's body, for the idempotency layer.
//! - `tonic`: [`RebuildBody`](idempotency::RebuildBody) for tonic's body, for the
//!   idempotency layer on a tonic server. The lock and semaphore layers need no feature
//!   for tonic.
//! - `tls`, `cluster`, `sentinel` (default): lock-core's features of the same names.
//!
//! Neither framework is a default feature, so that a tonic service does not compile axum:
//! an axum service names `features = ["axum"]`. A layer built without it whose key needs a
//! path parameter and that has no routes of its own is refused when it is built
//! ([`BuildError::NoPathParams`]), never silently unlocked.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_code)]

/// `get_ref`, `get_mut` and `into_inner` of a middleware service whose inner service is its
/// field `inner` (as tower-http's `define_inner_service_accessors!`).
#[cfg(any(feature = "lock", feature = "idempotency"))]
macro_rules! inner_service_accessors {
    () => {
        /// The inner service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The inner service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Unwraps the inner service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
#[cfg(any(feature = "lock", feature = "idempotency"))]
pub(crate) use inner_service_accessors;

#[cfg(feature = "lock")]
mod error;
#[cfg(feature = "idempotency")]
#[cfg_attr(docsrs, doc(cfg(feature = "idempotency")))]
pub mod idempotency;
#[cfg(feature = "lock")]
mod key;
#[cfg(feature = "lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "lock")))]
pub mod lock;
#[cfg(any(feature = "lock", feature = "idempotency"))]
mod response;
#[cfg(any(feature = "lock", feature = "idempotency"))]
mod retry;
#[cfg(feature = "semaphore")]
#[cfg_attr(docsrs, doc(cfg(feature = "semaphore")))]
pub mod semaphore;

// What the lock and semaphore layers share: their builders' and keys' errors, the request
// head a key function reads, and their rejections and response body.
#[cfg(feature = "lock")]
pub use error::BuildError;
#[cfg(feature = "lock")]
pub use key::{KeyError, RequestHead};
#[cfg(feature = "lock")]
pub use response::{BoxError, Rejection, RejectionKind, ResponseBody};
