//! [`DistributedSemaphoreLayer`]: a distributed concurrency limit per key.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body::Body;
use lock_core::{LockClient, LockName, OnLost};
use tower_layer::Layer;

use crate::error::BuildError;
use crate::key::head::RequestHead;
use crate::key::KeyError;
use crate::lock::config::{Hold, OutagePolicy};
use crate::lock::{DistributedLock, DistributedLockLayer, LockLayerBuilder};
use crate::response::{BoxError, Rejection};

/// A tower [`Layer`] that lets at most `permits` requests per key run at once across every
/// instance of a service: each request takes one permit of the key's semaphore
/// ([`LockClient::semaphore`]) and gives it back when its response is ready. "At most 3
/// exports per tenant", "at most 20 calls to the payment provider".
///
/// A request that gets no permit within the wait is answered `429 Too Many Requests` (or
/// [`when_full`](SemaphoreLayerBuilder::when_full)'s status) with a `Retry-After`, and a
/// gRPC call `RESOURCE_EXHAUSTED`; the body names the limit's family, never the holders.
/// A permit whose holder dies returns by itself after its lease. Everything else — keys,
/// routes, waits, outages, custom rejections — is as for [`DistributedLockLayer`], whose
/// service ([`DistributedLock`]) it makes.
///
/// ```no_run
/// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
/// use std::time::Duration;
/// use lock_tower::semaphore::DistributedSemaphoreLayer;
/// // At most 3 exports per tenant at once; a fourth waits up to 2 s, then gets a 429.
/// let layer = DistributedSemaphoreLayer::builder(client, 3)
///     .key("exports_<header.x-tenant:str>")
///     .wait(Duration::from_secs(2))
///     .build()?;
/// # let _ = layer; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedSemaphoreLayer {
    pub(crate) inner: DistributedLockLayer,
}

impl DistributedSemaphoreLayer {
    /// A layer limiting the requests of each name rendered from `key` to `permits` at once,
    /// with every other setting at its default.
    ///
    /// # Errors
    /// As [`SemaphoreLayerBuilder::build`].
    pub fn new(
        client: LockClient,
        key: impl Into<String>,
        permits: u32,
    ) -> Result<Self, BuildError> {
        Self::builder(client, permits).key(key).build()
    }

    /// A builder for a layer taking `permits` permits per key through `client`.
    pub fn builder(client: LockClient, permits: u32) -> SemaphoreLayerBuilder {
        SemaphoreLayerBuilder {
            inner: DistributedLockLayer::builder(client),
            permits,
            full: StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

impl<S> Layer<S> for DistributedSemaphoreLayer {
    type Service = DistributedLock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        self.inner.layer(inner)
    }
}

impl fmt::Debug for DistributedSemaphoreLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedSemaphoreLayer")
            .field("config", &self.inner.config)
            .finish()
    }
}

/// Settings of a [`DistributedSemaphoreLayer`]; made by
/// [`DistributedSemaphoreLayer::builder`]. The settings it shares with
/// [`LockLayerBuilder`] mean the same.
#[must_use = "call .build() to get the layer"]
pub struct SemaphoreLayerBuilder {
    inner: LockLayerBuilder,
    permits: u32,
    full: StatusCode,
}

/// Settings that are [`LockLayerBuilder`]'s, documented there.
macro_rules! shared_settings {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        pub fn $name(self, $($arg: $ty),*) -> Self {
            Self { inner: self.inner.$name($($arg),*), ..self }
        }
    )*};
}

impl SemaphoreLayerBuilder {
    shared_settings! {
        /// The key template: see [`LockLayerBuilder::key`].
        fn key(template: impl Into<String>);
        /// Locks only requests matching this route: see [`LockLayerBuilder::route`].
        fn route(template: impl Into<String>);
        /// Limits only requests with this method: see [`LockLayerBuilder::method`].
        fn method(method: Method);
        /// An explicit lease per permit: see [`LockLayerBuilder::lease`].
        fn lease(lease: Duration);
        /// How long a request waits for a permit before it is answered as full (see
        /// [`LockLayerBuilder::wait`]).
        ///
        /// # Default
        /// `Duration::ZERO`: a request over the limit is answered at once, as tower's
        /// concurrency and rate limiters answer; a wait only when chosen.
        fn wait(wait: Duration);
        /// What to do when Redis cannot be reached: see [`LockLayerBuilder::on_outage`].
        fn on_outage(policy: OutagePolicy);
        /// What to do when a permit is lost: see [`LockLayerBuilder::on_lost`].
        fn on_lost(on_lost: OnLost);
        /// The metrics label: see [`LockLayerBuilder::metrics_label`].
        fn metrics_label(label: impl Into<Cow<'static, str>>);
    }

    /// Parses a placeholder's value as a `T`: see [`LockLayerBuilder::parse_as`].
    pub fn parse_as<T>(self, placeholder: impl Into<String>) -> Self
    where
        T: FromStr + fmt::Display + 'static,
    {
        Self {
            inner: self.inner.parse_as::<T>(placeholder),
            ..self
        }
    }

    /// The key as a function of the request head: see [`LockLayerBuilder::key_fn`].
    pub fn key_fn<F>(self, key: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static,
    {
        Self {
            inner: self.inner.key_fn(key),
            ..self
        }
    }

    /// Custom answers: see [`LockLayerBuilder::on_rejection`] (a full semaphore is
    /// [`RejectionKind::Full`](crate::RejectionKind::Full)).
    pub fn on_rejection<F, B>(self, f: F) -> Self
    where
        F: Fn(&Rejection) -> Response<B> + Send + Sync + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self {
            inner: self.inner.on_rejection(f),
            ..self
        }
    }

    /// The HTTP status of a request that got no permit within the wait: `429 Too Many
    /// Requests` says "this client should slow down", `503 Service Unavailable` says "the
    /// service is at capacity". gRPC calls get `RESOURCE_EXHAUSTED` either way.
    ///
    /// # Default
    /// `429 Too Many Requests`.
    pub fn when_full(mut self, status: StatusCode) -> Self {
        self.full = status;
        self
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Errors
    /// As [`LockLayerBuilder::build`], and [`BuildError::Permits`] for 0 permits.
    pub fn build(self) -> Result<DistributedSemaphoreLayer, BuildError> {
        if self.permits == 0 {
            return Err(BuildError::Permits);
        }
        let mut inner = self.inner;
        inner.wait.get_or_insert(Duration::ZERO);
        inner.hold = Hold::Permit {
            permits: self.permits,
            full: self.full,
        };
        Ok(DistributedSemaphoreLayer {
            inner: inner.build()?,
        })
    }
}

impl fmt::Debug for SemaphoreLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreLayerBuilder")
            .field("inner", &self.inner)
            .field("permits", &self.permits)
            .field("full", &self.full)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose Redis is never contacted: layers are built without it.
    fn offline_client() -> LockClient {
        LockClient::new("redis://127.0.0.1:1").expect("lazy client")
    }

    #[tokio::test]
    async fn redlock_cannot_take_permits() {
        let nodes = (1..=3).map(|p| format!("redis://127.0.0.1:{p}"));
        let redlock = LockClient::redlock(nodes).build().expect("lazy client");
        let sem = DistributedSemaphoreLayer::new(redlock, "k", 2).unwrap_err();
        assert!(matches!(sem, BuildError::Unsupported { .. }), "{sem}");
        assert!(sem.to_string().contains("permit holds"), "{sem}");
    }

    /// A full semaphore answers at once unless the builder is given a wait.
    #[tokio::test]
    async fn permits_wait_only_when_told() {
        let permits = DistributedSemaphoreLayer::new(offline_client(), "k", 2).unwrap();
        assert_eq!(permits.inner.config.wait, Duration::ZERO);
        let waiting = DistributedSemaphoreLayer::builder(offline_client(), 2)
            .key("k")
            .wait(Duration::from_secs(1))
            .build()
            .unwrap();
        assert_eq!(waiting.inner.config.wait, Duration::from_secs(1));
    }
}
