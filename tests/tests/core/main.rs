//! The lock engine against one real redis-server: exclusion, expiry, watchdog, loss, reentrancy,
//! fencing, wake-up, cancellation, connections, limits, names, Redisson interop.
//!
//! One test target per area, so the heavy dependencies link a few times; each module is one
//! concern.

mod bounded;
mod cancellation;
mod connect;
mod departed;
mod exclusion;
mod expiry;
mod fairness;
mod fencing;
mod functions;
mod guarded_write;
mod interop;
mod known_outage;
mod least_privilege;
mod limits;
mod lost;
mod multi;
mod names;
mod outage;
mod redisson_channels;
mod reentrancy;
mod replicas;
mod rw;
mod semaphore;
mod wakeup;
mod watchdog;
