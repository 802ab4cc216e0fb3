//! `#[distributed_lock]` end to end against real Redis (the compile-time behaviour is in the
//! `macro-ui` package).
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod answers;
mod macro_axum;
mod macro_e2e;
mod macro_family;
mod macro_metrics;
mod pass;
