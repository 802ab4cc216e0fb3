//! Operating locks: inspect, list and force-release, metrics, and the oversell demo.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod ops_inspect;
mod ops_metrics;
mod oversell_demo;
