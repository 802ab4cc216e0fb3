//! Operating locks: inspect, list and force-release, metrics, the oversell demo, what the
//! examples and the CLI say without a Redis, and the guide's links from the repository.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod guide_links;
mod no_redis;
mod ops_inspect;
mod ops_metrics;
mod ops_otel;
mod ops_spans;
mod oversell_demo;
