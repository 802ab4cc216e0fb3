//! [`DistributedLockLayer`] and its builder.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Response};
use lock_core::{LockClient, LockClientBuilder, LockName, OnLost};
use tower_layer::Layer;

use crate::config::{Config, Hold, OutagePolicy, RejectionFn};
use crate::error::BuildError;
use crate::head::RequestHead;
use crate::key::{Canonical, KeyError, KeyFn, KeySpec};
use crate::response::Rejection;
use crate::route::Routes;
use crate::service::DistributedLock;

/// A tower [`Layer`] that takes one distributed lock per request; see the
/// [crate docs](crate). Cheap to clone.
///
/// ```no_run
/// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
/// use lock_tower::DistributedLockLayer;
/// // One lock per item; `<id>` is the route's `{id}` parameter.
/// let layer = DistributedLockLayer::builder(client)
///     .route("/items/{id}/buy")
///     .key("item_<id>")
///     .build()?;
/// # let _ = layer; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedLockLayer {
    pub(crate) config: Arc<Config>,
}

impl DistributedLockLayer {
    /// A layer locking every request on the name rendered from `key` (see
    /// [`LockLayerBuilder::key`]), with every other setting at its default.
    ///
    /// # Errors
    /// As [`LockLayerBuilder::build`].
    pub fn new(client: LockClient, key: impl Into<String>) -> Result<Self, BuildError> {
        Self::builder(client).key(key).build()
    }

    /// A builder for a layer taking its locks through `client`.
    pub fn builder(client: LockClient) -> LockLayerBuilder {
        LockLayerBuilder {
            client,
            key: None,
            canonical: Vec::new(),
            routes: Vec::new(),
            methods: Vec::new(),
            lease: None,
            wait: None,
            outage: OutagePolicy::FailClosed,
            on_lost: OnLost::Abort,
            rejection: None,
            family: None,
            hold: Hold::Exclusive,
        }
    }
}

impl<S> Layer<S> for DistributedLockLayer {
    type Service = DistributedLock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DistributedLock::from_config(inner, Arc::clone(&self.config))
    }
}

impl fmt::Debug for DistributedLockLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedLockLayer")
            .field("config", &self.config)
            .finish()
    }
}

/// Settings of a [`DistributedLockLayer`]; made by [`DistributedLockLayer::builder`].
#[must_use = "call .build() to get the layer"]
pub struct LockLayerBuilder {
    client: LockClient,
    key: Option<Key>,
    canonical: Vec<(String, Canonical)>,
    routes: Vec<String>,
    methods: Vec<Method>,
    lease: Option<Duration>,
    wait: Option<Duration>,
    outage: OutagePolicy,
    on_lost: OnLost,
    rejection: Option<RejectionFn>,
    family: Option<Cow<'static, str>>,
    pub(crate) hold: Hold,
}

enum Key {
    Template(String),
    Fn(KeyFn),
}

impl LockLayerBuilder {
    /// The lock name as a key template, in the grammar of `#[distributed_lock]`:
    /// - `<id>` (or `<path.id>`): the path parameter `id` of the matched route, and nothing
    ///   else — never the query string, so that a client cannot choose its lock;
    /// - `<query.id>`, `<header.x-tenant>`: only that source (gRPC metadata are headers);
    /// - `<<` is a literal `<`; values are percent-encoded, so distinct requests never share
    ///   a name.
    ///
    /// A missing, empty, repeated or undecodable value answers `400` / `INVALID_ARGUMENT`
    /// naming the parameter, without a lock attempt. Replaces an earlier
    /// [`key_fn`](Self::key_fn).
    ///
    /// Path parameters come from the layer's own [`route`](Self::route) templates or, with
    /// the `axum` feature (on by default), from the route axum matched; see [routes and path
    /// parameters](crate#routes-and-path-parameters).
    pub fn key(mut self, template: impl Into<String>) -> Self {
        self.key = Some(Key::Template(template.into()));
        self
    }

    /// Parses the value of placeholder `placeholder` as a `T` and puts `T`'s `Display` into
    /// the name, so that every text the handler reads as the same value takes the same
    /// lock: with `parse_as::<u64>("id")`, `/items/7`, `/items/07` and `/items/+7` all lock
    /// `item_7`, as `Path<u64>` reads them all as 7. A value that does not parse is answered
    /// `400` without a lock attempt. Use it whenever the handler parses the parameter into
    /// a type whose text has more than one spelling (integers, UUIDs, case-insensitive
    /// codes).
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// let layer = lock_tower::DistributedLockLayer::builder(client)
    ///     .key("item_<id>")
    ///     .parse_as::<u64>("id")
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`build`](Self::build) fails with [`BuildError::UnknownPlaceholder`] when the key
    /// template has no such placeholder (or the key is a function).
    pub fn parse_as<T>(mut self, placeholder: impl Into<String>) -> Self
    where
        T: FromStr + fmt::Display + 'static,
    {
        let type_name = std::any::type_name::<T>();
        let short = type_name.rsplit("::").next().unwrap_or(type_name);
        let invalid = format!("is not a valid {short}");
        let canonical: Canonical = Arc::new(move |text: &str| {
            text.parse::<T>()
                .map(|value| value.to_string())
                .map_err(|_| invalid.clone())
        });
        self.canonical.push((placeholder.into(), canonical));
        self
    }

    /// The lock name computed by a function of the request head, for anything a template
    /// cannot express. Return a [`KeyError`] to answer `400` / `INVALID_ARGUMENT`. The body
    /// is not available (see [locking on a field of the
    /// body](crate#locking-on-a-field-of-the-body)).
    /// Replaces an earlier [`key`](Self::key).
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// use lock_tower::{DistributedLockLayer, KeyError};
    /// let layer = DistributedLockLayer::builder(client)
    ///     .key_fn(|head| {
    ///         // e.g. a tenant that an earlier authentication layer stored.
    ///         let tenant = head.extensions().get::<String>().ok_or(KeyError::missing("tenant"))?;
    ///         Ok(format!("tenant_{tenant}").into())
    ///     })
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    pub fn key_fn<F>(mut self, key: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static,
    {
        self.key = Some(Key::Fn(Arc::new(key)));
        self
    }

    /// Locks only requests whose path matches this route template (axum's syntax:
    /// `/items/{id}/buy`, `/files/{*path}`; for gRPC `/package.Service/Method`), and makes its
    /// parameters available to the key. Call it several times for several routes. Requests
    /// that match no route pass through unlocked. Routes are matched against the path the
    /// layer sees: inside `Router::nest("/api", …)`, without the `/api` prefix.
    ///
    /// # Default
    /// No route: every request is locked, and `<id>` reads the path parameters of the route
    /// axum matched (with the `axum` feature); without that feature, a template with a path
    /// placeholder needs routes.
    pub fn route(mut self, template: impl Into<String>) -> Self {
        self.routes.push(template.into());
        self
    }

    /// Locks only requests with this method; call it several times for several methods.
    /// Requests with other methods pass through unlocked (with a layer on a whole router,
    /// `.method(Method::POST)` leaves `GET`, `HEAD` and CORS preflights alone).
    ///
    /// # Default
    /// Every method is locked.
    pub fn method(mut self, method: Method) -> Self {
        self.methods.push(method);
        self
    }

    /// An explicit lease: the lock expires after `lease` unless released first, and the
    /// client's watchdog does not renew it.
    ///
    /// # Default
    /// No explicit lease: the watchdog renews the lock for as long as the request runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long a request waits for a busy lock before it is answered `409` / `ABORTED`;
    /// `Duration::ZERO` fails fast.
    ///
    /// # Default
    /// The client's configured wait ([`LockClientBuilder::wait`], 30 s unless set), the
    /// same rule as for `client.lock(…)` and `#[distributed_lock]`. A request path usually
    /// wants a few seconds: set it here or on the client.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// What to do when Redis cannot be reached.
    ///
    /// # Default
    /// [`OutagePolicy::FailClosed`]: `503` / `UNAVAILABLE`.
    pub fn on_outage(mut self, policy: OutagePolicy) -> Self {
        self.outage = policy;
        self
    }

    /// What to do when the lock is lost while the inner service runs: with
    /// [`OnLost::Abort`] the inner future is dropped and the request answered `503` /
    /// `ABORTED`; with [`OnLost::Continue`] it runs on (the loss is logged).
    ///
    /// # Default
    /// [`OnLost::Abort`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Answers rejections with `f` instead of [`Rejection::default_response`] (which `f` may
    /// call and adjust). The `String` becomes the response body.
    pub fn on_rejection<F>(mut self, f: F) -> Self
    where
        F: Fn(&Rejection) -> Response<String> + Send + Sync + 'static,
    {
        self.rejection = Some(Arc::new(f));
        self
    }

    /// The metrics label of this layer's locks (see
    /// [`LockRequest::metrics_label`](lock_core::LockRequest::metrics_label)): a bounded name
    /// for the kind of lock, never the rendered key. A `&'static str` is used without copying.
    ///
    /// # Default
    /// The key template (`"item_<id>"`); `"lock-tower"` with a [`key_fn`](Self::key_fn).
    pub fn metrics_label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.family = Some(label.into());
        self
    }

    /// The old name of [`metrics_label`](Self::metrics_label).
    #[deprecated(note = "renamed `metrics_label`: \"family\" names the lock family")]
    pub fn family(self, family: impl Into<Cow<'static, str>>) -> Self {
        self.metrics_label(family)
    }

    /// Takes the read side of the name's read-write lock for requests with a safe method
    /// (`GET`, `HEAD`, `OPTIONS`, `TRACE`) and the write side for the others, on the same
    /// key: `GET /items/7` runs beside other `GET`s of item 7, never beside a
    /// `POST /items/7/buy`. Once a write waits, new reads queue behind it, so writes are not
    /// starved. See [`LockClient::read_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// let layer = lock_tower::DistributedLockLayer::builder(client)
    ///     .key("item_<id>")
    ///     .read_write_by_method()
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// # Default
    /// Off: every request takes the exclusive lock.
    pub fn read_write_by_method(mut self) -> Self {
        self.hold = Hold::ReadWriteByMethod;
        self
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Errors
    /// [`BuildError`] for a missing or invalid key template, a bad route, a path
    /// placeholder (`<id>`, `<path.id>`) a route lacks or that nothing could fill, a
    /// [`parse_as`](Self::parse_as) without its placeholder, or a lease below the minimum.
    pub fn build(self) -> Result<DistributedLockLayer, BuildError> {
        let (key, default_family) = match self.key.ok_or(BuildError::NoKey)? {
            Key::Template(text) => (KeySpec::template(&text, self.canonical)?, Cow::Owned(text)),
            Key::Fn(f) => match self.canonical.into_iter().next() {
                Some((placeholder, _)) => {
                    return Err(BuildError::UnknownPlaceholder {
                        template: "(a key function)".to_owned(),
                        placeholder,
                    })
                }
                None => (KeySpec::Fn(f), Cow::Borrowed("lock-tower")),
            },
        };
        if let Some(lease) = self.lease.filter(|l| *l < LockClientBuilder::MIN_LEASE) {
            return Err(BuildError::Lease { lease });
        }
        let routes = if self.routes.is_empty() {
            check_path_source(&key, &default_family)?;
            None
        } else {
            Some(Routes::new(&self.routes, &key)?)
        };
        Ok(DistributedLockLayer {
            config: Arc::new(Config {
                client: self.client,
                key,
                routes,
                methods: self.methods,
                lease: self.lease,
                wait: self.wait,
                outage: self.outage,
                on_lost: self.on_lost,
                rejection: self.rejection,
                family: self.family.unwrap_or(default_family),
                hold: self.hold,
                holds: Default::default(),
            }),
        })
    }
}

/// Without routes and without the `axum` feature no path parameter is ever known: a path
/// placeholder is refused here rather than with a 400 on every request.
#[cfg(not(feature = "axum"))]
fn check_path_source(key: &KeySpec, template: &str) -> Result<(), BuildError> {
    match key.path_params().next() {
        Some((placeholder, _)) => Err(BuildError::NoPathParams {
            template: template.to_owned(),
            placeholder: placeholder.to_owned(),
        }),
        None => Ok(()),
    }
}

/// With the `axum` feature the route axum matched gives the path parameters.
#[cfg(feature = "axum")]
fn check_path_source(_: &KeySpec, _: &str) -> Result<(), BuildError> {
    Ok(())
}

impl fmt::Debug for LockLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayerBuilder")
            .field("routes", &self.routes)
            .field("methods", &self.methods)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("outage", &self.outage)
            .field("on_lost", &self.on_lost)
            .finish_non_exhaustive()
    }
}
