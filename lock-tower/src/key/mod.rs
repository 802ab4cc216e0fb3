//! Request → lock name, shared by the lock and semaphore layers: key templates
//! ([`spec`]) whose placeholders read path parameters (from the layer's [`route`]s or the
//! route axum matched), query parameters and headers of the [`head`], each parsed as its
//! [`typed`] value; or a key function.
//!
//! The grammar and its rules are documented for users in the
//! [lock layer's docs](crate::lock#keys).

mod error;
pub(crate) mod head;
#[cfg(test)]
mod props;
pub(crate) mod route;
pub(crate) mod spec;
pub(crate) mod typed;

pub use error::KeyError;
pub use head::RequestHead;
pub(crate) use spec::{KeyFn, KeySpec};
