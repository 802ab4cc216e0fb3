//! Leader election on the exclusive lock: the election's handle ([`handle`]: campaign,
//! leader, observe), the leader's term ([`leadership`]), the snapshot of who leads
//! ([`leader`]) and the stream of changes ([`observe`]).
//!
//! A term is one hold of the election's name: its fencing token is the term's, the
//! watchdog renews it, and `lost()` ends it. The leader's proclaimed value is a field of the
//! lock hash (it dies with the term), and each new term or value is announced on the lock's
//! release channel, which observers listen to beside the holder's TTL.

pub(crate) mod handle;
pub(crate) mod leader;
pub(crate) mod leadership;
pub(crate) mod observe;
