//! Tower layers that take distributed locks ([`lock_core`]) per request, for axum, tonic and
//! any `http::Request` service. One folder per middleware, as in tower-http:
//!
//! | module | layer | what it does to a request |
//! | --- | --- | --- |
//! | [`lock`] | [`DistributedLockLayer`] | runs it under one lock, named from the request: requests for the same name run one at a time across every instance that shares the Redis |
//! | [`semaphore`] | [`DistributedSemaphoreLayer`] | lets at most N requests per key run at once, answering the others `429` |
//! | [`idempotency`] | [`IdempotencyLayer`] | runs it once per `Idempotency-Key` and replays the stored response to duplicates |
//!
//! Every layer's types are also at the crate root. The lock and semaphore layers name
//! their locks with key templates (`"item_<id:u64>"`, see [keys](lock#keys)) and answer
//! rejections alike ([answers](lock#answers)).
//!
//! # axum
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{extract::Path, routing::post, Extension, Router};
//! use lock_tower::{DistributedLockLayer, LockInfo};
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
//! # use lock_tower::DistributedLockLayer;
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
//! The handler finds the lock's [`LockInfo`] (name and fencing token) in
//! `request.extensions()`.
//!
//! # Feature flags
//!
//! - `axum`: path placeholders (`<id:u64>`) read the route axum matched, so a layer needs
//!   no `.route(…)` of its own (see [routes](lock#routes-and-path-parameters)); and
//!   [`RebuildBody`] for axum's body, for the idempotency layer.
//! - `tonic`: [`RebuildBody`] for tonic's body, for the idempotency layer on a tonic server.
//!   The lock and semaphore layers need no feature for tonic.
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
pub(crate) use inner_service_accessors;

mod error;
pub mod idempotency;
mod key;
pub mod lock;
mod response;
mod retry;
pub mod semaphore;

pub use error::BuildError;
pub use idempotency::{
    IdempotencyBody, IdempotencyFuture, IdempotencyLayer, IdempotencyLayerBuilder, Idempotent,
    RebuildBody, REPLAYED_HEADER,
};
pub use key::{KeyError, RequestHead};
pub use lock::{
    DistributedLock, DistributedLockLayer, LockLayerBuilder, OutagePolicy, ResponseFuture,
};
pub use lock_core::{LockInfo, OnLost};
pub use response::{BoxError, Rejection, RejectionKind, ResponseBody};
pub use semaphore::{DistributedSemaphoreLayer, SemaphoreLayerBuilder};
