//! Multi-locks: several names taken all-or-nothing, in one global order.
//!
//! Every caller takes the names in the order of their Redis keys, whatever order it gave
//! them in, so two callers that need {a, b} and {b, a} never each hold one and wait for the
//! other: whoever takes the first key in that order takes the rest in turn. Each name is an
//! ordinary lock (queue, hand-off, watchdog, fencing token, Redlock), so a multi-lock and
//! single locks of the same names exclude each other, and a scope that holds one of the
//! names re-enters it.
//!
//! By concept: the request and the one-by-one path ([`request`]), the uncontended path
//! that takes every name in one function call ([`at_once`]), and the guard of them all
//! ([`guard`]).

mod at_once;
mod guard;
mod request;

pub use guard::{MultiLockGuard, MultiLost};
pub use request::MultiLockRequest;
