//! Run once across the fleet: scheduled jobs (`LockClient::job`, ShedLock's semantics) and
//! leader election (`LockClient::election`), with instances in their own processes (the
//! `fleet` binary of this package) where the behaviour is about several instances, and on
//! every topology.

mod election;
mod jobs;
mod observe;
mod skew;
mod topologies;
