//! lock-tower end to end: axum and tonic servers on loopback ports, real Redis.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod edge;
mod idempotency_outage;
mod spellings;
mod tower_axum;
mod tower_idempotency;
mod tower_idempotency_grpc;
mod tower_tonic;
