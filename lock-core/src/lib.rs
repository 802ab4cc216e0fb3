//! Redis distributed locks: Redisson-compatible, reentrant, fenced, watched.
//!
//! A local `Mutex` guards one process; services that run as several instances need a lock
//! that all of them see. `lock-core` keeps it in Redis, the way Redisson's `RLock` does, so
//! a Rust service and a Java service exclude each other on the same Redis key (distlock's
//! name under its [key prefix](LockClientBuilder::key_prefix)):
//!
//! - the lock is a hash `owner → hold count` with a lease (`PEXPIRE`), taken and released by
//!   Redis functions (one Lua library, called with `FCALL`), so "check then set" and "check then delete" are atomic, and a holder whose
//!   lease ran out can never delete its successor's lock;
//! - a lock taken without an explicit lease is renewed by the client's watchdog (30 s lease,
//!   renewed every 10 s), one round trip per tick for all locks of the client;
//! - waiters subscribe to the lock's release channel and retry when the holder's TTL runs
//!   out, so a missed message never strands them;
//! - every fresh acquisition carries a [fencing token](LockGuard::fencing_token) that only
//!   grows, and [`LockGuard::lost`] tells you when the lock can no longer be assumed held;
//! - inside a [`scope`] a lock is reentrant.
//!
//! # Quick start
//!
//! ```no_run
//! use std::time::Duration;
//! use lock_core::{LockClient, LockError};
//!
//! # async fn demo() -> Result<(), LockError> {
//! let client = LockClient::new("redis://127.0.0.1:6379")?;
//!
//! // Wait up to 2 s for the lock; the watchdog renews it while the guard lives.
//! let guard = client.lock("item_7").wait(Duration::from_secs(2)).await?;
//! println!("token {}", guard.fencing_token());
//! guard.release().await?;
//!
//! // Or run a future under the lock; it is released whatever happens.
//! let sold = client.with_lock("item_7", async { 1 }).await?;
//! # let _ = sold;
//! # Ok(()) }
//! ```
//!
//! # The lock family
//! The same engine (waits, leases, the watchdog, `lost()`, fencing tokens, holder records,
//! metrics) takes four kinds of hold; each request is a [`LockRequest`] except the
//! multi-lock's [`MultiLockRequest`]:
//!
//! | call | holds at once |
//! |---|---|
//! | [`LockClient::lock`] | one owner |
//! | [`LockClient::read_lock`], [`LockClient::write_lock`] | many readers or one writer (Redisson's `RReadWriteLock`); once a writer waits, new readers queue behind it |
//! | [`LockClient::semaphore`] | up to `permits` owners, each permit with its own lease |
//! | [`LockClient::lock_all`] | several names, all or nothing, in one global order (no deadlock) |
//!
//! ```no_run
//! # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
//! let reading = client.read_lock("catalog_7").await?;
//! let permit = client.semaphore("export_tenant_9", 3).await?;
//! let both = client.lock_all(["acct_17", "acct_4"]).await?;
//! assert!(both.fencing_token("acct_4").is_some());
//! # Ok(()) }
//! ```
//!
//! # Run once across the fleet
//! [`LockClient::job`] runs a scheduled job's fire on one instance and skips it on the
//! others, saying which in a [`JobOutcome`](job::JobOutcome) (ShedLock's semantics:
//! `hold_at_least` keeps the name held after a fast job so skewed schedules do not run a
//! fire twice, `hold_at_most` ends a dead instance's hold). [`LockClient::election`] elects
//! a leader: [`Election::campaign`](election::Election::campaign) waits for a
//! [`Leadership`](election::Leadership) (its term's fencing token, `lost()`, `resign()`),
//! [`Election::leader`](election::Election::leader) reads who leads and
//! [`Election::observe`](election::Election::observe) streams the changes. Their types are
//! in the [`job`] and [`election`] modules.
//!
//! ```no_run
//! # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
//! use std::time::Duration;
//! use lock_core::job::JobOutcome;
//!
//! let fire = client.job("nightly_report").hold_at_least(Duration::from_secs(300));
//! if let JobOutcome::Skipped(_) = fire.run(async { /* the report */ }).await? {
//!     println!("another instance runs it");
//! }
//! let term = client.election("orders_consumer").campaign().await?;
//! term.resign().await?;
//! # Ok(()) }
//! ```
//!
//! # Operating locks
//! Every acquisition records who holds the lock ([`HolderInfo`]: service, host, pid,
//! request id, since when) next to it, in the same function call, so a busy lock's
//! [`LockError::WaitTimeout`] names its holder. [`LockClient::inspect`],
//! [`LockClient::list`] and [`LockClient::force_release`] are the operator's tools (what
//! they answer is in the [`ops`] module), and the `distlock` CLI (package `distlock-cli`)
//! wraps them. A forced release tells the former holder's client at once (its guard's
//! [`lost`](LockGuard::lost) fires within milliseconds).
//!
//! # At the edge of a service
//! [`LockClient::ping`] answers a readiness probe (every topology; see there what "ready"
//! means for each), and [`LockClient::is_reachable`] says, without a round trip, whether the
//! client's last calls reached Redis; an outage is logged once per client (`warn`, repeated
//! at most every minute) and its end once (`info`). [`LockClient::shutdown`] releases every
//! hold of a client when the service stops. [`Answer`] maps a [`LockError`] to an HTTP
//! status, a gRPC code, a message and a `Retry-After`, for lock-tower and for the `axum` and
//! `tonic` features.
//!
//! # Metrics
//! With the `metrics` feature, the client reports through the [`metrics`](https://docs.rs/metrics)
//! facade (install any exporter, e.g. Prometheus). Every series is labelled `template`, the
//! request's metrics label: the key template of the lock
//! ([`LockRequest::metrics_label`]), never the lock's name. Every
//! series is described (`# HELP`) when a client is built:
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `distlock_acquisitions_total` | counter | `outcome`: `acquired`, `timeout`, `unavailable` | acquisitions (not re-entries) |
//! | `distlock_wait_seconds` | histogram | `outcome` | time an acquisition waited |
//! | `distlock_contended_total` | counter | | acquisitions that found the lock busy |
//! | `distlock_wakeups_total` | counter | `by`: `message`, `ttl` | waiter wake-ups: by a release message, or because the holder's lease ran out without one |
//! | `distlock_hold_seconds` | histogram | | grant (after the wait) to release or loss |
//! | `distlock_held` | gauge | | locks held by this process now |
//! | `distlock_renewals_total` | counter | | renewals Redis confirmed |
//! | `distlock_renewal_failures_total` | counter | | renewals Redis did not answer |
//! | `distlock_lost_total` | counter | | holds lost |
//! | `distlock_claims_missed_total` | counter | | hand-offs whose claim ran out before this client extended it |
//!
//! # Feature flags
//! - `cluster` (default): Redis Cluster clients ([`LockClient::cluster`]).
//! - `sentinel` (default): clients of a Sentinel-managed master ([`LockClient::sentinel`]).
//!
//!   Without these two, a client speaks to one server or to Redlock nodes, and the crate
//!   compiles less of redis-rs.
//! - `tls`: `rediss://` URLs and the builder's certificate settings
//!   ([`LockClientBuilder::tls_root_certificate`], through rustls). Without it a
//!   `rediss://` URL is refused when the client is built, with an error naming this
//!   feature.
//! - `macros`: re-exports `#[distributed_lock]`, the attribute for async functions (see the
//!   `lock-macros` crate for its options).
//! - `metrics`: reports the metrics above through the `metrics` facade.
//! - `axum`: `LockError` implements axum's `IntoResponse`, and `tonic`: `tonic::Status:
//!   From<LockError>` — so a handler or gRPC method can return lock errors with `?`, with
//!   lock-tower's status codes and a body that never names the holder (409 / `ABORTED` when
//!   busy, 503 / `UNAVAILABLE` when Redis is down, 503 / `ABORTED` when lost).
//! - `idempotency`: idempotency keys ([`LockClient::idempotency`], the protocol lock-tower's
//!   idempotency layer runs; its types are in the `idempotency` module).
//! - `serde`: `LockClient::idempotent`, a future run once per idempotency key with its
//!   result stored as JSON (turns `idempotency` on).
//!
//! # The guide
//! The guide walks through distlock chapter by chapter — getting started (with the life
//! of a lock in pictures), the macro, the layers, the lock family, jobs and elections,
//! idempotency keys, topologies, operating, migrating from Redisson. It is the `guide`
//! module of these docs on [docs.rs](https://docs.rs/lock-core/latest/lock_core/guide/),
//! built with the `docs` feature (which only adds documentation).
//!
//! # Redis
//! [`redis`] is re-exported: the redis-rs this crate speaks, for the public signatures that
//! name its types (a [guarded write](LockGuard::write) takes a `redis::Pipeline` and reads
//! `redis::FromRedisValue` replies), so that a caller's pipeline is of the same version
//! without a second dependency to keep in step: `lock_core::redis::pipe()`.
#![cfg_attr(feature = "docs", doc = "\nHere: [the guide](guide).")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod answer;
mod client;
pub mod election;
mod error;
#[cfg(feature = "docs")]
#[cfg_attr(docsrs, doc(cfg(feature = "docs")))]
pub mod guide;
#[cfg(feature = "idempotency")]
#[cfg_attr(docsrs, doc(cfg(feature = "idempotency")))]
pub mod idempotency;
pub mod job;
mod lock;
mod observe;
pub mod ops;
mod protocol;
mod transport;

pub use answer::Answer;
pub use client::builder::LockClientBuilder;
pub use client::default::{default_client, set_default_client};
pub use client::handle::LockClient;
pub use client::replica_ack::ReplicaAck;
pub use error::LockError;
pub use lock::current_lock::{current_lock, with_lock_info, LockInfo, WithLockInfo};
pub use lock::guard::{LockGuard, Lost, Release};
pub use lock::guarded_run::{Guarded, GuardedRun, OnLost};
pub use lock::multi::{MultiLockGuard, MultiLockRequest, MultiLost};
pub use lock::request::LockRequest;
pub use lock::scope::{scope, InScope, OwnerScope};
pub use lock_template::{encode_value, TemplateError};
pub use protocol::holder::HolderInfo;
pub use protocol::kind::mode::LockMode;
pub use protocol::name::LockName;
pub use protocol::template::KeyTemplate;
/// redis-rs, at the version this crate uses: public signatures name its types
/// ([`LockGuard::write`] and [`LockInfo::write`] take a `&redis::Pipeline`).
pub use redis;

/// Not public API: what `#[distributed_lock]` expands to.
#[doc(hidden)]
pub mod __private {
    pub use crate::protocol::template::KeyBuilder;

    /// How a locked function returns a lock failure: implemented only for `Result`, so that
    /// any other return type is one error, on the type, saying what to return.
    #[diagnostic::on_unimplemented(
        message = "`#[distributed_lock]` functions must return `Result<T, E>` with `E: From<lock_core::LockError>`: when the lock cannot be taken or is lost, the function returns `Err`; `{Self}` is not a `Result`",
        label = "not a `Result`"
    )]
    pub trait LockResult {
        /// The error type.
        type Error;
        /// `Err(error)`.
        fn err(error: Self::Error) -> Self;
    }

    #[diagnostic::do_not_recommend]
    impl<T, E> LockResult for Result<T, E> {
        type Error = E;
        fn err(error: E) -> Self {
            Err(error)
        }
    }

    /// How a scheduled job's function (`on_busy = "skip"`) returns: implemented only for
    /// `Result<JobOutcome<T>, E>`, whose body returns `Result<T, E>`.
    #[diagnostic::on_unimplemented(
        message = "`#[distributed_lock(on_busy = \"skip\")]` functions must return `Result<JobOutcome<T>, E>`: a skipped fire is `Ok(JobOutcome::Skipped(_))`, and the body returns `Result<T, E>`; `{Self}` is not",
        label = "not a `Result<JobOutcome<T>, E>`"
    )]
    pub trait JobResult {
        /// What the body returns.
        type Body;
        /// The function's result from the job's outcome.
        fn from_outcome(outcome: crate::job::JobOutcome<Self::Body>) -> Self;
    }

    #[diagnostic::do_not_recommend]
    impl<T, E> JobResult for Result<crate::job::JobOutcome<T>, E> {
        type Body = Result<T, E>;
        fn from_outcome(outcome: crate::job::JobOutcome<Result<T, E>>) -> Self {
            match outcome {
                crate::job::JobOutcome::Ran(body) => body.map(crate::job::JobOutcome::Ran),
                crate::job::JobOutcome::Skipped(skipped) => {
                    Ok(crate::job::JobOutcome::Skipped(skipped))
                }
            }
        }
    }
}

/// Available with the crate feature `macros`.
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
#[doc(inline)]
pub use lock_macros::distributed_lock;
