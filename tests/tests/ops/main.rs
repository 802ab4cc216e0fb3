//! Operating locks: inspect, list and force-release, metrics, spans, that no event names a
//! lock without the opt-in, the oversell demo, what the examples and the CLI say without a
//! Redis; and the repository's promises to its readers: the guide's links, the tests
//! SAFETY.md cites, each package's license files.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod guide_links;
mod inspect;
mod licenses;
mod name_leaks;
mod no_redis;
mod otel;
mod oversell_demo;
mod recorded_metrics;
mod safety_citations;
mod spans;
