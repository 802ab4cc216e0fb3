//! The lock layer: one distributed lock per request, exclusive or read-write by method.
//!
//! [`DistributedLockLayer`] renders a lock name from each request (a key template such as
//! `"item_<id:u64>"`, or a closure), takes the lock through a [`lock_core::LockClient`], calls
//! the inner service while holding it, and releases it when the inner service's response is
//! ready. Requests for the same name run one at a time across every instance that shares the
//! Redis; requests for different names do not wait for each other.
//!
//!
//!
//! Defaults sized for a request path: a request waits at most
//! [5 s](LockLayerBuilder::DEFAULT_WAIT) for a busy lock (less when the client's own wait is
//! shorter), not the client's 30 s for background jobs; a
//! [semaphore layer](crate::semaphore::DistributedSemaphoreLayer) answers `429` at once unless given a wait.
//!
//! The layer works the same on a whole `Router` (`.layer(lock)`: only requests matching its
//! [routes](LockLayerBuilder::route) and [methods](LockLayerBuilder::method) are locked, the
//! others pass through) and in a `tower::ServiceBuilder`.
//!
//! Examples for axum and tonic are on the [front page](crate); on tonic, routes select the
//! locked methods (`.route("/orders.Orders/PlaceOrder")`).
//!
//! The handler finds the lock's [`LockInfo`](lock_core::LockInfo) (name and fencing token) in
//! `request.extensions()`.
//!
//! # Readers and writers
//!
//! [`read_write_by_method`](LockLayerBuilder::read_write_by_method) makes one template a
//! read-write lock: safe methods (`GET`, `HEAD`, `OPTIONS`, `TRACE`) take its read side and
//! run together, the others take its write side and run alone — `GET /items/7` beside
//! other `GET`s, never beside `POST /items/7/buy`. A waiting write is not starved by a
//! stream of reads.
//!
//! ```no_run
//! # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
//! let lock = lock_tower::lock::DistributedLockLayer::builder(client)
//!     .key("item_<id:u64>")
//!     .read_write_by_method()
//!     .build()?;
//! # let _ = lock; Ok(()) }
//! ```
//!
//! # Keys
//!
//! Key templates use the grammar of `#[distributed_lock]` ([`lock_core::KeyTemplate`]), and
//! every placeholder names its source and its type:
//!
//! | placeholder | value |
//! | --- | --- |
//! | `<id:u64>`, `<path.id:u64>` | the path parameter `id` of the matched route (below), and nothing else |
//! | `<query.id:u64>` | the query parameter `id` (`+` and `%XX` decoded) |
//! | `<header.x-tenant:str>` | the header or gRPC metadata `x-tenant` |
//!
//! The type is the one the handler reads the value as — `u8` … `u128`, `usize`, `i8` …
//! `i128`, `isize`, `bool`, `uuid` — or `str` for the decoded text as it is; for other
//! types, [`parse_as`](LockLayerBuilder::parse_as). The layer parses the value as the
//! handler's extractor does (`FromStr`, as axum's `Path` and `Query` do) and puts the parsed
//! value into the name, so **one value is one lock, however it is spelled**: `/items/8`,
//! `/items/08`, `/items/+8` and `/items/%38` are all `Path<u64>` 8 and all lock `item_8`;
//! upper- and lower-case, braced and simple UUIDs are one `uuid`. A lock on the raw text
//! would take four locks for one item and let four purchases of it run at once, so a
//! placeholder without a type is a [build error](crate::BuildError::UntypedPlaceholder), and raw
//! text is `<id:str>`, written on purpose (right when the handler takes a `String`). A value
//! the type rejects is answered `400` / `INVALID_ARGUMENT` before any lock is taken, as the
//! extractor would answer it.
//!
//! A request never chooses which placeholder source fills the name: `<id>` is never read from
//! the query string or a header (a fallback would let `POST /items/7/buy?id=8` lock
//! `item_8` and run beside the holder of item 7). A repeated query parameter, header or
//! path parameter (`?id=7&id=8`) is refused with `400`, since the handler could read
//! either one; percent-encoded names and values are decoded first (`?i%64=8` is `id`,
//! `/items/%37` is item 7), as axum decodes them.
//!
//! Values are percent-encoded into the name, so two different requests never share a lock
//! by accident (`a:b` + `c` and `a` + `b:c` give different names). For anything else in the
//! request head (a value an authentication layer stored in the extensions, say), give a
//! [key function](LockLayerBuilder::key_fn). Neither sees the body: see
//! [locking on a field of the body](#locking-on-a-field-of-the-body).
//!
//! # Routes and path parameters
//!
//! Path placeholders (`<id:u64>`, `<path.id:u64>`) are filled from:
//!
//! - The layer's own [routes](LockLayerBuilder::route), in axum's syntax
//!   (`/items/{id}/buy`, matched with `matchit` as axum matches them). They also select
//!   the locked requests (the others pass through), work the same for axum, tonic and plain
//!   tower, and let the builder check every path placeholder before the server starts.
//!   Routes are matched against the path the layer sees: inside `Router::nest("/api", …)`,
//!   without the `/api` prefix.
//! - Without routes of its own, with lock-tower's **`axum` feature**: the
//!   parameters axum parsed for the route it matched (`axum::extract::RawPathParams`, as a
//!   handler extracts them), in `Router::route_layer` and `Router::layer`. Under
//!   `Router::nest("/shops/{shop}", …)` the prefix's parameters are included (`<shop>`).
//!   So `.route("/items/{id}/buy", post(buy)).route_layer(DistributedLockLayer::new(client, "item_<id:u64>")?)`
//!   needs no second copy of the route.
//!
//! A path placeholder that nothing can fill is the layer's misconfiguration, never the
//! client's: without routes and without the `axum` feature the builder refuses it
//! ([`BuildError::NoPathParams`](crate::BuildError::NoPathParams)), and with routes of its
//! own ([`route`](LockLayerBuilder::route)) it checks each against the template when it is
//! built ([`BuildError::MissingPathParam`](crate::BuildError::MissingPathParam)). With the
//! `axum` feature and no routes, the layer learns the route at its first request: one whose
//! matched route lacks the parameter is answered a generic `500` / `INTERNAL` (the server's
//! mistake, not the client's), an `error` event names the template, the route and the
//! placeholder, and the same is written once to stderr, for a service without a tracing
//! subscriber. A request that no axum route matched (`Router::layer` puts the layer on
//! the fallback too: `/health`, a scanner's random URL) passes through unlocked to the
//! router's 404, with one `warn` per layer, not an error per request. Prefer
//! `route_layer`, which leaves the fallback alone; a layer that wraps the whole `Router`
//! from outside sees no matched route at all, and needs `.route(…)`.
//!
//! # Locking on a field of the body
//!
//! The layer takes the lock before the inner service reads the body, and it does not buffer
//! bodies: a key sees only the request head. To lock on a field of the body, take the lock
//! in the handler, after the body is decoded, with `#[distributed_lock]` (lock-core's
//! `macros` feature). Names bound by the handler's parameter patterns are template
//! parameters, so `Json(order): Json<PlaceOrder>` gives `<order.customer_id>`:
//!
//! ```no_run
//! use axum::{extract::State, routing::post, Json, Router};
//! use lock_core::{distributed_lock, LockClient, LockError};
//!
//! #[derive(Clone)]
//! struct App {
//!     locks: LockClient,
//! }
//!
//! #[derive(serde::Deserialize)]
//! struct PlaceOrder {
//!     customer_id: u64,
//!     sku: String,
//! }
//!
//! /// Implements `From<LockError>` (the macro returns lock failures as `Err(e.into())`) and
//! /// `IntoResponse` (409 for `e.is_wait_timeout()`, 503 for `e.is_unavailable()`, …).
//! struct ApiError(LockError);
//! # impl From<LockError> for ApiError {
//! #     fn from(e: LockError) -> Self { ApiError(e) }
//! # }
//! # impl axum::response::IntoResponse for ApiError {
//! #     fn into_response(self) -> axum::response::Response {
//! #         (axum::http::StatusCode::CONFLICT, self.0.to_string()).into_response()
//! #     }
//! # }
//!
//! #[distributed_lock(key = "customer_<order.customer_id>", client = app.locks, wait = "2s")]
//! async fn place_order(
//!     State(app): State<App>,
//!     Json(order): Json<PlaceOrder>,
//! ) -> Result<String, ApiError> {
//!     // Runs while `customer_<id>` is held; `lock_core::current_lock()` has the token.
//!     Ok(format!("{} for customer {}", order.sku, order.customer_id))
//! }
//!
//! # fn demo(locks: LockClient) {
//! let app: Router = Router::new()
//!     .route("/orders", post(place_order))
//!     .with_state(App { locks });
//! # let _ = app; }
//! ```
//!
//! A tonic method returns `Result<Response<_>, Status>`, and `Status` cannot implement
//! `From<LockError>` in your crate: decode the message, then call a locked method that
//! returns your own error type, converted to a `Status` with `?`:
//!
//! ```ignore
//! #[tonic::async_trait]
//! impl Orders for OrderService {
//!     async fn place_order(
//!         &self,
//!         request: Request<PlaceOrderRequest>,
//!     ) -> Result<Response<PlaceOrderReply>, Status> {
//!         Ok(Response::new(self.place(request.into_inner()).await?))
//!     }
//! }
//!
//! impl OrderService {
//!     // `OrderError: From<LockError>`, and `Status: From<OrderError>` (ABORTED when busy).
//!     #[distributed_lock(key = "customer_<order.customer_id>", client = self.locks)]
//!     async fn place(&self, order: PlaceOrderRequest) -> Result<PlaceOrderReply, OrderError> {
//!         // …
//!     }
//! }
//! ```
//!
//! The handler's own error type then answers for a busy lock or an unreachable Redis; the
//! layer's [answers](#answers), `Retry-After` and [`LockInfo`](lock_core::LockInfo) extension do not apply.
//!
//! # Answers
//!
//! HTTP requests get plain-text answers; gRPC requests (`content-type: application/grpc…`)
//! get a trailers-only gRPC response (`grpc-status` and `grpc-message` in the headers).
//!
//! | situation | HTTP | gRPC |
//! | --- | --- | --- |
//! | lock busy for the whole [wait](LockLayerBuilder::wait) | `409 Conflict` + [`Retry-After`](#retry-after) | `ABORTED` |
//! | key parameter missing, empty, repeated or invalid (no lock attempted) | `400 Bad Request` | `INVALID_ARGUMENT` |
//! | a path placeholder the route lacks (a misconfiguration, logged at `error` and once to stderr) | `500 Internal Server Error` | `INTERNAL` |
//! | Redis unavailable ([fail closed](OutagePolicy::FailClosed), the default) | `503 Service Unavailable` + `Retry-After: 5` | `UNAVAILABLE` |
//! | lock lost mid-request ([`OnLost::Abort`](lock_core::OnLost::Abort), the default) | `503 Service Unavailable` | `ABORTED` |
//! | a request Redis refuses for good (a misconfiguration; a read-write or semaphore layer on a Redlock client is refused when it is built: `BuildError::Unsupported`) | `500 Internal Server Error` | `INTERNAL` |
//!
//! The bodies are generic: they name the key parameter at fault or the lock's
//! [metrics label](LockLayerBuilder::metrics_label) (``lock `item_<id>` is busy``), never who holds the lock
//! (service, host, pid, request id), a Redis address or an internal error. Those go to
//! `tracing` (at `debug` for each rejection, `error` for a misconfiguration) and stay
//! available to a custom answer through [`Rejection::lock_error`](crate::Rejection::lock_error). Every answer can be
//! replaced with [`on_rejection`](LockLayerBuilder::on_rejection).
//!
//! The statuses and codes are lock-core's [`Answer`](lock_core::Answer), the one mapping that
//! `LockError`'s own answers (lock-core's `axum` and `tonic` features) use too, with the
//! same `Retry-After`; the layer's messages name the lock's family, and its busy
//! `Retry-After` comes from the hold times it has seen.
//!
//! The [wait](LockLayerBuilder::wait) is the layer's own, or the client's configured wait
//! ([`LockClientBuilder::wait`](lock_core::LockClientBuilder::wait)) when that is shorter
//! than [`LockLayerBuilder::DEFAULT_WAIT`] (5 s); a semaphore layer waits only when told.
//!
//! ## Retry-After
//!
//! `Retry-After` is this layer's estimate of when the lock will be free: the mean time its
//! requests have held the lock (a moving average, acquisition to release), less how long the
//! current holder has held it (from its holder record), never beyond the holder's remaining
//! lease, in whole seconds rounded up and at least 1. Before any of its requests has
//! finished, the layer answers its wait (what one more attempt would wait anyway), bounded
//! by the remaining lease. The holder's lease alone says little: the watchdog renews it
//! every 10 s, so a lock held for 1 s shows up to 30 s of lease.
//!
//! # Lifetime of the lock
//!
//! - The lock is taken when the request's response future is first polled, and held until
//!   the inner service's response future completes. It is released then, before the
//!   response is handed on, so a client that sends its next request at once does not find
//!   its own lock. The response therefore waits for the release's Redis round trip, but at
//!   most 500 ms (not the client's
//!   [command timeout](lock_core::LockClientBuilder::command_timeout)) — with
//!   [`OnLost::Continue`](lock_core::OnLost::Continue) not at all while the client finds Redis unreachable
//!   ([`LockClient::is_reachable`](lock_core::LockClient::is_reachable)); with
//!   [`OnLost::Abort`](lock_core::OnLost::Abort) (the default) the release is tried even then, since it is the last
//!   check that the hold lasted: a `NotHeld` answer turns the response into `503`. A release
//!   not answered in time goes on in the background, and one that fails is logged (the lock
//!   then ends with its lease).
//! - A [forced release](lock_core::LockClient::force_release) by an operator reaches the
//!   holder's client at once: with [`OnLost::Abort`](lock_core::OnLost::Abort) the inner future is dropped within
//!   milliseconds and the request answered `503` / `ABORTED`.
//! - On shutdown, once the server stopped serving, [`LockClient::shutdown`](lock_core::LockClient::shutdown)
//!   releases whatever the client still holds.
//! - Dropping the response future releases the lock at once in the background: a client
//!   that disconnects, or a timeout layer that gives up, never leaves a lock behind.
//! - Streaming bodies: the lock covers producing the response head, not streaming the
//!   body. A handler that must stay exclusive while the body streams should do the work
//!   before it returns (or hold its own guard inside the body stream).
//! - Without an explicit [lease](LockLayerBuilder::lease) the client's watchdog renews the
//!   lock for as long as the request runs. When the lock is lost anyway (Redis lost the key,
//!   or an explicit lease ran out), the inner future is dropped and the request answered
//!   `503` / `ABORTED`, unless [`OnLost::Continue`](lock_core::OnLost::Continue) was chosen.
//! - The inner service runs inside a reentrancy owner scope ([`lock_core::scope`]) with
//!   [`lock_core::current_lock`] set: a handler, or a `#[distributed_lock]` function it calls,
//!   that takes the same lock again re-enters it instead of waiting for itself.
//!
//! # Readiness, and where to put other layers
//!
//! `poll_ready` is the inner service's, and the service made ready goes with the request
//! (tower's clone-and-swap idiom); it is called once the lock is held. So a request waiting
//! for a busy lock keeps what the inner service reserved for it in `poll_ready` for the
//! whole [wait](LockLayerBuilder::wait). That matters for layers that reserve capacity
//! there, such as `tower::limit::ConcurrencyLimit` (a permit) and `tower::buffer::Buffer`
//! (a queue slot): *inside* this layer, requests queued on one busy key hold them, and ten
//! waiters fill a `concurrency_limit(10)` and stall every other key. Put such layers
//! *outside* this one (before it in a `ServiceBuilder`, whose first layer is the outermost),
//! where they bound the waiting requests too, or keep the wait short.
//!
//! # Tracing
//!
//! lock-core's spans (`distlock.acquire`, then `distlock.hold`; see lock-core's operating
//! guide, "Tracing") are children of the span current where the acquisition runs: under
//! tower-http's `TraceLayer` or any layer that enters a span per request, the request's span,
//! with nothing to set up. The layer also records the outcome on the request span itself —
//! into the fields `distlock.acquire.outcome` (`acquired`, `timeout`, `unavailable`,
//! `error`) and `distlock.acquire.wait_duration` (seconds), when the span declares them
//! (`tracing` fills only declared fields) — and logs it at `debug` as
//! `distlock.layer.acquired`. For tower-http, declare them in `make_span_with`:
//!
//! ```
//! use tracing::field::Empty;
//!
//! // `TraceLayer::new_for_http().make_span_with(request_span)`
//! fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
//!     tracing::info_span!(
//!         "request",
//!         http.request.method = %request.method(),
//!         url.path = request.uri().path(),
//!         distlock.acquire.outcome = Empty,
//!         distlock.acquire.wait_duration = Empty,
//!     )
//! }
//! # let _ = request_span::<()>;
//! ```
//!
//! # Cost
//!
//! [`ResponseFuture`] is a state machine (acquiring →
//! calling → releasing) whose calling state holds the inner service's future, inside the
//! request's [`OwnerScope`](lock_core::OwnerScope) and with
//! [`current_lock`](lock_core::current_lock) set ([`InScope`](lock_core::InScope),
//! [`WithLockInfo`](lock_core::WithLockInfo)), the [`LockGuard`](lock_core::LockGuard) and
//! its [`Lost`](lock_core::Lost) watch as plain fields. A locked request allocates:
//!
//! - one box for the acquisition (lock-core's acquire state machine: large, and it cannot
//!   be named), with what taking any lock allocates (Redis keys, owner id, holder record,
//!   function arguments);
//! - the request's owner scope (an `Arc`, and its entry for the held lock) and the hold's
//!   shared state (an `Arc`);
//! - the name: one `String` per placeholder value (and for a path parameter or query value
//!   that needed percent-decoding), the route's parameter list if it has parameters, and
//!   the name itself;
//! - the metrics family, copied into each lock request when it is the key template (a
//!   `&'static str` given to [`metrics_label`](LockLayerBuilder::metrics_label) is not copied);
//! - two copies of the lock's name: the [`LockInfo`](lock_core::LockInfo) that `current_lock` answers and the one
//!   in the request's extensions (and the extensions map, if the request had none);
//! - one spawned task that deletes the lock in Redis (it runs even if the future is dropped);
//!
//! beside at least two Redis round trips (acquire, release) and the client's own buffers.
//! The lost watch allocates nothing (a timer and a wait on the hold's cancellation token).
//! Requests that match no route pass through without allocating; a request whose key is
//! invalid allocates only its answer. With the `axum` feature and no routes of its own, the
//! matched route's parameters are copied out of axum's (one `Vec`, the names and values
//! reference-counted).
//!
//! # The parts
//!
//! [`layer`](DistributedLockLayer) and [`builder`](LockLayerBuilder) check the settings
//! once; `config` holds them for every service and decides what one request gets (passed
//! through, refused, or its lock's name, through the crate's key templates); the
//! [service](DistributedLock) hands each request to its [future](ResponseFuture), the state
//! machine that acquires, calls the inner service under the hold, and releases.

mod builder;
pub(crate) mod config;
mod future;
mod layer;
mod service;
mod trace;

pub use builder::LockLayerBuilder;
pub use config::OutagePolicy;
pub use future::ResponseFuture;
pub use layer::DistributedLockLayer;
pub use service::DistributedLock;
