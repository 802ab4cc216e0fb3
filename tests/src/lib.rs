//! Test support for distlock: real `redis-server` processes and fault injection.
//!
//! Rules these helpers follow (and tests using them should too):
//! * tests talk to real `redis-server` processes on free loopback ports, never
//!   to a mock and never to a server on 6379;
//! * every wait is bounded and waits on an event where one exists.
//!
//! Modules:
//! * [`server`]: [`RedisServer`], a private server with stop/kill/restart/pause/resume (the
//!   workspace's one launcher, the published `lock-testkit` crate, re-exported);
//! * [`proxy`]: [`TcpProxy`], a loopback TCP proxy that injects latency,
//!   blackholes, connection cuts, refusals and lost replies;
//! * [`RedisCluster`], a local Redis Cluster of [`RedisServer`] nodes, and [`sentinel`]'s
//!   Sentinel-managed pair (from the kit too);
//! * [`acl`]: the application user's ACL rule, and the paths it must run;
//! * [`locks`]: helpers for lock-engine tests (clients, probes, event waits, checkers);
//! * [`outage`]: an outage a client knows of (the fail-fast tests);
//! * [`postgres`]: [`postgres::PostgresServer`], a private Postgres for the fencing tests;
//! * [`redisson`]: a test client speaking Redisson's `RLock` protocol;
//! * [`spans`]: the spans and events of a test binary, captured by a `tracing` layer.

pub mod acl;
pub mod fault;
pub mod proxy;
#[cfg(test)]
use lock_testkit::testutil;

#[doc(inline)]
pub use lock_testkit as server;
pub use lock_testkit::sentinel;

pub use proxy::TcpProxy;
pub use server::RedisCluster;
pub use server::{
    free_port, free_ports, redis_server_available, redis_url_for_tests, ClosedPort, RedisServer,
    RedisServerBuilder, StartError, TempDir,
};
pub mod locks;
pub mod metrics;
pub mod outage;
pub mod postgres;
pub mod redisson;
pub mod spans;
