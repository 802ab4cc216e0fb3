//! Beyond one server: Redis Cluster, Redlock and Sentinel, each started locally.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod cluster;
mod edge;
mod least_privilege;
mod promoted_replicas;
mod redlock;
mod sentinel;
