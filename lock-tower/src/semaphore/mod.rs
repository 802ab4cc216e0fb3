//! The semaphore layer: a distributed concurrency limit per key.
//!
//! [`DistributedSemaphoreLayer`] lets at most N requests per key run at once across every
//! instance (a semaphore with expiring permits per key): a request that gets no permit
//! within the wait is answered `429 Too Many Requests` (or `503`, see
//! [`when_full`](SemaphoreLayerBuilder::when_full)) with a `Retry-After`, or gRPC
//! `RESOURCE_EXHAUSTED`.
//!
//! ```no_run
//! # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
//! // At most 3 exports per tenant, whichever instance serves them.
//! let limit = lock_tower::semaphore::DistributedSemaphoreLayer::new(client, "exports_<header.x-tenant:str>", 3)?;
//! # let _ = limit; Ok(()) }
//! ```
//!
//! A permit is a hold like a lock's: the layer makes the lock layer's service
//! ([`DistributedLock`](crate::lock::DistributedLock)) and future
//! ([`ResponseFuture`](crate::lock::ResponseFuture)), with the same [keys](crate::lock#keys),
//! [routes](crate::lock#routes-and-path-parameters), outage and loss settings, and the
//! [answers](crate::lock#answers) of a busy lock but for its status (`429` by default) and
//! gRPC code. What this folder adds is the permit count and the full answer, in
//! [`SemaphoreLayerBuilder`].

mod layer;

pub use layer::{DistributedSemaphoreLayer, SemaphoreLayerBuilder};
