//! `#[distributed_lock]` end to end against real Redis (the compile-time behaviour is in the
//! `macro-ui` package).
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod answers;
mod axum_router;
mod e2e;
mod family;
mod metric_labels;
mod pass;
