//! Leader election on the exclusive lock: [`LockClient::election`](crate::LockClient::election)
//! gives an [`Election`]; [`Election::campaign`] waits for a [`Leadership`] (a term: its
//! fencing token, `lost()`, `resign()`), [`Election::leader`] reads who leads ([`Leader`])
//! and [`Election::observe`] streams the changes ([`Observe`]).
//!
//! A term is one hold of the election's name: its fencing token is the term's, the
//! watchdog renews it, and `lost()` ends it. The leader's proclaimed value is a field of the
//! lock hash (it dies with the term), and each new term or value is announced on the lock's
//! release channel, which observers listen to beside the holder's TTL.

// The election's handle (campaign, leader, observe), the leader's term, the snapshot of who
// leads and the stream of changes.
pub(crate) mod handle;
pub(crate) mod leader;
pub(crate) mod leadership;
pub(crate) mod observe;

pub use handle::Election;
pub use leader::Leader;
pub use leadership::Leadership;
pub use observe::Observe;
