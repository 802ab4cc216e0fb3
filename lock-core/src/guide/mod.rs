//! The guide: distlock from the first lock to running it in production.
//!
//! Chapters, in reading order (each is a page of these docs; the code in them is compiled
//! and checked with the crate's doc tests):
//!
//! 1. [Getting started](getting_started): a client, a lock, its guard and fencing token,
//!    and pictures of the life of a lock and of what happens when one is lost.
//! 2. [The macro](macro_): `#[distributed_lock]` on an async function, with its client.
//! 3. [The layers](layers): one lock per request for axum and tonic, concurrency limits.
//! 4. [The lock family](family): read-write locks, semaphores, multi-locks.
//! 5. [Jobs and elections](jobs_and_elections): run once across the fleet.
//! 6. [Idempotency keys](idempotency): what "exactly once" covers, and fencing the rest.
//! 7. [Fencing your database](fencing_database): a Postgres or MySQL row that refuses a
//!    stale holder's write, and how that relates to guarded writes in Redis.
//! 8. [Topologies](topologies): one server, Sentinel, Cluster, Redlock, and what each
//!    promises.
//! 9. [Operating](operating): the Redis version, least privilege, the CLI, metrics, health,
//!    shutdown.
//! 10. [Testing a service that uses distlock](testing): a private Redis per test, with the
//!     `lock-testkit` crate.
//! 11. [Migrating from Redisson](migrating_from_redisson): sharing locks with Java services.
//!
//! The contract — what is promised per primitive and topology, and the test that shows
//! it — is SAFETY.md in the repository; this guide links to it rather than repeating it.
//!
//! These modules hold documentation only: nothing in them is code.

#[cfg_attr(doc, aquamarine::aquamarine)]
#[doc = include_str!("getting_started.md")]
/// include_mmd!("src/guide/diagrams/life_of_a_lock.mmd")
#[doc = include_str!("getting_started_loss.md")]
/// include_mmd!("src/guide/diagrams/loss.mmd")
#[doc = include_str!("getting_started_fencing.md")]
pub mod getting_started {}

#[doc = include_str!("macro.md")]
pub mod macro_ {}

#[doc = include_str!("layers.md")]
pub mod layers {}

#[doc = include_str!("family.md")]
pub mod family {}

#[doc = include_str!("jobs_and_elections.md")]
pub mod jobs_and_elections {}

#[doc = include_str!("idempotency.md")]
pub mod idempotency {}

#[cfg_attr(doc, aquamarine::aquamarine)]
#[doc = include_str!("fencing_database.md")]
/// include_mmd!("src/guide/diagrams/fencing_database.mmd")
#[doc = include_str!("fencing_database_details.md")]
pub mod fencing_database {}

#[cfg_attr(doc, aquamarine::aquamarine)]
#[doc = include_str!("topologies.md")]
/// include_mmd!("src/guide/diagrams/topologies.mmd")
#[doc = include_str!("topologies_details.md")]
pub mod topologies {}

#[doc = include_str!("operating.md")]
pub mod operating {}

#[doc = include_str!("testing.md")]
pub mod testing {}

#[doc = include_str!("migrating_from_redisson.md")]
pub mod migrating_from_redisson {}
