//! Scheduled jobs with ShedLock's semantics: run a fire on one instance of the fleet, skip it
//! on the others ([`request`]), say which happened in the type ([`outcome`]), and keep the
//! name held for a minimum time after the start ([`linger`]).

pub(crate) mod linger;
pub(crate) mod outcome;
pub(crate) mod request;
