//! What `#[distributed_lock]` accepts: each module compiles as part of this target (its
//! expansion type-checks against lock-core), and its test makes the futures without running
//! them. What it must refuse is pinned by the `macro-ui` package's trybuild cases.

// The cases exist to be compiled: types and methods no test calls are the point, not a smell.
#![allow(dead_code)]

mod axum_handler;
mod clients;
mod crate_path;
mod family;
mod free_fns;
mod instrument;
mod jobs;
mod map_err;
mod methods;
mod no_warnings;
mod send;
