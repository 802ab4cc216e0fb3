//! The workspace's one `redis-server` launcher: a private server on a free loopback port,
//! in its own temporary directory, with fault controls (stop, kill, restart, pause,
//! resume). The tests, the `distlock` CLI's tests and the examples all start their servers
//! through it.
//!
//! ```no_run
//! use distlock_redis_server::RedisServer;
//!
//! let server = RedisServer::builder().args(["--maxmemory", "1mb"]).start();
//! let client = server.client(); // redis://127.0.0.1:<free port>
//! # drop(client);
//! ```
//!
//! * [`RedisServer`], [`RedisServerBuilder`]: the server and its options (extra arguments,
//!   a configuration file, a fixed port, a cluster node); [`RedisServerBuilder::try_start`]
//!   reports a failure as a [`StartError`] instead of panicking.
//! * [`free_port`], [`free_ports`]: loopback ports nothing listened on a moment ago.
//! * [`TempDir`]: a private directory removed on drop.
//! * [`redis_server_available`], [`redis_url_for_tests`]: what a test may use.
//!
//! The binary is `$REDIS_SERVER_BIN`, else `redis-server` on `PATH`. The server is a plain
//! child process: it stays in the caller's process group (a Ctrl-C in a terminal stops it
//! too) and is killed when its [`RedisServer`] is dropped.

mod builder;
mod error;
mod ports;
mod process;
mod server;
mod temp_dir;
#[doc(hidden)]
pub mod testutil;

pub use builder::RedisServerBuilder;
pub use error::{StartError, INSTALL_HINT};
pub use ports::{free_port, free_ports, ClosedPort};
pub use server::{redis_server_available, redis_url_for_tests, RedisServer};
pub use temp_dir::TempDir;
