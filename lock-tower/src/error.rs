//! [`BuildError`]: why a layer could not be built.

use std::time::Duration;

use lock_core::{LockClientBuilder, LockMode, TemplateError};

/// Why a layer could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No [`key`](crate::lock::LockLayerBuilder::key) or [`key_fn`](crate::lock::LockLayerBuilder::key_fn)
    /// was given.
    #[error("no lock key: call .key(\"item_<id>\") or .key_fn(…) on the builder")]
    NoKey,
    /// A semaphore layer with 0 permits would refuse every request.
    #[error("a semaphore layer needs at least 1 permit")]
    Permits,
    /// The key template does not parse.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A placeholder names no known source.
    #[error("key template {template:?}: placeholder `<{placeholder}>` has no known source (use `<name>`, `<path.<name>>`, `<query.<name>>` or `<header.<name>>`)")]
    UnknownSource {
        /// The template.
        template: String,
        /// The placeholder path.
        placeholder: String,
    },
    /// A route template was rejected by the router (`matchit`, as axum uses).
    #[error("route {route:?}: {reason}")]
    Route {
        /// The route template.
        route: String,
        /// What the router said.
        reason: String,
    },
    /// A path placeholder (`<id>` or `<path.id>`) names a parameter a route does not have.
    #[error("key placeholder `<{placeholder}>`: route {route:?} has no `{{{param}}}` parameter")]
    MissingPathParam {
        /// The route template.
        route: String,
        /// The parameter.
        param: String,
        /// The placeholder as written (`id`, `path.id`).
        placeholder: String,
    },
    /// A path placeholder, in a layer that has no routes of its own and is built without
    /// the `axum` feature: nothing could ever fill it.
    #[error("key template {template:?}: `<{placeholder}>` is a path parameter, but the layer has no route to take it from: give the layer its routes with `.route(\"/items/{{id}}\")`, enable lock-tower's `axum` feature, or write `<query.…>` to read the query string")]
    NoPathParams {
        /// The template.
        template: String,
        /// The placeholder as written.
        placeholder: String,
    },
    /// [`parse_as`](crate::lock::LockLayerBuilder::parse_as) names a placeholder the key template
    /// does not have.
    #[error("parse_as(\"{placeholder}\"): key template {template:?} has no `<{placeholder}>` placeholder")]
    UnknownPlaceholder {
        /// The template.
        template: String,
        /// The placeholder given to `parse_as`.
        placeholder: String,
    },
    /// A placeholder has no type: the layer would lock its raw text, and `08`, `+8` and
    /// `%38` would be three locks for the one item 8 that `Path<u64>` reads.
    #[error("key template {template:?}: placeholder `<{placeholder}>` has no type: write the type the handler reads it as (`<{placeholder}:u64>`, `<{placeholder}:uuid>`, …), `<{placeholder}:str>` to lock its text as it is, or call .parse_as::<T>(\"{placeholder}\") for another type")]
    UntypedPlaceholder {
        /// The template.
        template: String,
        /// The placeholder's path.
        placeholder: String,
    },
    /// A placeholder names a type the layer does not know.
    #[error("key template {template:?}: placeholder `<{placeholder}:{ty}>`: unknown type `{ty}` (known: {known}; for another type, write `<{placeholder}>` and call .parse_as::<T>(\"{placeholder}\"))")]
    UnknownType {
        /// The template.
        template: String,
        /// The placeholder's path.
        placeholder: String,
        /// The type as written.
        ty: String,
        /// The types a template may name.
        known: String,
    },
    /// A placeholder is given two types: two different ones in the template, or one there
    /// and one by [`parse_as`](crate::lock::LockLayerBuilder::parse_as).
    #[error("key template {template:?}: placeholder `<{placeholder}>` is given more than one type (in the template, or there and by .parse_as)")]
    ConflictingTypes {
        /// The template.
        template: String,
        /// The placeholder's path.
        placeholder: String,
    },
    /// The lease is below [`LockClientBuilder::MIN_LEASE`].
    #[error(
        "lease {lease:?} is below the minimum of {:?}",
        LockClientBuilder::MIN_LEASE
    )]
    Lease {
        /// The lease given.
        lease: Duration,
    },
    /// The layer takes a kind of hold its client cannot take (read-write locks and
    /// semaphores on a Redlock client): refused here rather than answered 500 on every
    /// request. See [`LockClient::supports`](lock_core::LockClient::supports).
    #[error("this client cannot take {mode} holds (under Redlock only exclusive locks can be voted on node by node): give the layer a single-server, Cluster or Sentinel client")]
    Unsupported {
        /// The kind of hold the client cannot take.
        mode: LockMode,
    },
}
