//! lock-tower end to end: axum and tonic servers on loopback ports, real Redis.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod axum_router;
mod edge;
mod idempotency;
mod idempotency_grpc;
mod idempotency_outage;
mod spellings;
mod tonic_service;
