//! [`LockLayerBuilder`]: the settings of a [`DistributedLockLayer`], checked when it is built.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response};
use http_body::Body;
use lock_core::{LockClient, LockClientBuilder, LockName, OnLost};

use crate::error::BuildError;
use crate::key::head::RequestHead;
use crate::key::route::Routes;
use crate::key::typed::ValueType;
use crate::key::{KeyError, KeyFn, KeySpec};
use crate::lock::config::{Config, Hold, OutagePolicy, RejectionFn};
use crate::lock::layer::DistributedLockLayer;
use crate::response::{custom_body, BoxError, Rejection};

/// Settings of a [`DistributedLockLayer`]; made by [`DistributedLockLayer::builder`].
#[must_use = "call .build() to get the layer"]
pub struct LockLayerBuilder {
    client: LockClient,
    key: Option<Key>,
    parse_as: Vec<(String, ValueType)>,
    routes: Vec<String>,
    methods: Vec<Method>,
    lease: Option<Duration>,
    pub(crate) wait: Option<Duration>,
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
    /// Every setting at its default ([`DistributedLockLayer::builder`]).
    pub(crate) fn new(client: LockClient) -> Self {
        Self {
            client,
            key: None,
            parse_as: Vec::new(),
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

    /// The longest a request waits for a busy lock unless the layer sets its own
    /// [`wait`](Self::wait): a few seconds suit a request path; the client's default
    /// (30 s) suits background jobs.
    pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

    /// The lock name as a key template, in the grammar of `#[distributed_lock]`, where
    /// every placeholder names the type the handler reads its value as:
    /// - `<id:u64>` (or `<path.id:u64>`): the path parameter `id` of the matched route, and
    ///   nothing else — never the query string, so that a client cannot choose its lock;
    /// - `<query.id:u64>`, `<header.x-tenant:str>`: only that source (gRPC metadata are
    ///   headers);
    /// - the type: `u8` … `u128`, `usize`, `i8` … `i128`, `isize`, `bool`, `uuid`, or `str`
    ///   for the (decoded) text as it is. The value is parsed as the handler's extractor
    ///   parses it (`FromStr`, as axum's `Path` and `Query` do) and the name holds the
    ///   parsed value, so every spelling of one value is one lock: `/items/8`, `/items/08`,
    ///   `/items/+8` and `/items/%38` all lock `item_8` with `item_<id:u64>`. For another
    ///   type, leave the placeholder untyped and call [`parse_as`](Self::parse_as);
    /// - `<<` is a literal `<`; values are percent-encoded, so distinct requests never share
    ///   a name.
    ///
    /// A missing, empty, repeated or undecodable value, or one the type rejects (`/items/x`
    /// for `<id:u64>`), answers `400` / `INVALID_ARGUMENT` naming the parameter, without a
    /// lock attempt — as the handler's extractor would. Replaces an earlier
    /// [`key_fn`](Self::key_fn).
    ///
    /// Path parameters come from the layer's own [`route`](Self::route) templates or, with
    /// lock-tower's `axum` feature, from the route axum matched; see [routes and path
    /// parameters](crate::lock#routes-and-path-parameters).
    ///
    /// # Errors
    /// [`build`](Self::build) fails with [`BuildError::UntypedPlaceholder`] for a
    /// placeholder with no type (raw text is `<id:str>`, written on purpose), and with
    /// [`BuildError::UnknownType`] for a type not listed above.
    pub fn key(mut self, template: impl Into<String>) -> Self {
        self.key = Some(Key::Template(template.into()));
        self
    }

    /// Types an untyped placeholder of the key template as `T`: its value is parsed as a
    /// `T` and `T`'s `Display` goes into the name, so that every text the handler reads as
    /// the same value takes the same lock. For the types a template can name
    /// (`<id:u64>`, `<id:uuid>`, …) write them there; this is for the others (a
    /// case-insensitive code, a newtype). A value that does not parse is answered `400`
    /// without a lock attempt.
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// # #[derive(Debug)] struct Sku(String);
    /// # impl std::str::FromStr for Sku { type Err = (); fn from_str(s: &str) -> Result<Self, ()> { Ok(Sku(s.to_ascii_uppercase())) } }
    /// # impl std::fmt::Display for Sku { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(&self.0) } }
    /// // `Sku` parses `ab-12` and `AB-12` as one code, as the handler's `Path<Sku>` does.
    /// let layer = lock_tower::lock::DistributedLockLayer::builder(client)
    ///     .key("sku_<sku>")
    ///     .parse_as::<Sku>("sku")
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`build`](Self::build) fails with [`BuildError::UnknownPlaceholder`] when the key
    /// template has no such placeholder (or the key is a function), and with
    /// [`BuildError::ConflictingTypes`] when the placeholder already has a type.
    pub fn parse_as<T>(mut self, placeholder: impl Into<String>) -> Self
    where
        T: FromStr + fmt::Display + 'static,
    {
        let type_name = std::any::type_name::<T>();
        let short = type_name.rsplit("::").next().unwrap_or(type_name);
        self.parse_as
            .push((placeholder.into(), ValueType::of::<T>(short)));
        self
    }

    /// The lock name computed by a function of the request head, for anything a template
    /// cannot express. Return a [`KeyError`] to answer `400` / `INVALID_ARGUMENT`. The body
    /// is not available (see [locking on a field of the
    /// body](crate::lock#locking-on-a-field-of-the-body)).
    /// Replaces an earlier [`key`](Self::key).
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// use lock_tower::{lock::DistributedLockLayer, KeyError};
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
    /// The client's configured wait ([`LockClientBuilder::wait`]) when it is shorter than
    /// [`DEFAULT_WAIT`](Self::DEFAULT_WAIT) (5 s), else 5 s: a request does not hang for
    /// the client's 30 s, which suit background jobs. (A
    /// [semaphore layer](crate::semaphore::DistributedSemaphoreLayer) answers at once by default.)
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
    /// call and adjust). `f` returns a response with any body (`String`, axum's `Body`, …),
    /// so an application's own error type answers as it does elsewhere:
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// use axum::http::StatusCode;
    /// use axum::response::{IntoResponse, Response};
    /// use lock_tower::{lock::DistributedLockLayer, Rejection};
    ///
    /// struct AppError(StatusCode, String);
    /// impl From<&Rejection> for AppError {
    ///     fn from(r: &Rejection) -> Self {
    ///         let status = r.default_response().status();
    ///         AppError(status, r.message().to_owned())
    ///     }
    /// }
    /// impl IntoResponse for AppError {
    ///     fn into_response(self) -> Response {
    ///         (self.0, format!("{{\"error\":{:?}}}", self.1)).into_response()
    ///     }
    /// }
    ///
    /// let layer = DistributedLockLayer::builder(client)
    ///     .key("item_<id:u64>")
    ///     .on_rejection(|r| AppError::from(r).into_response())
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// [`Rejection::retry_after`] is not added for you: copy it (or start from
    /// [`default_response`](Rejection::default_response)'s headers) when it matters.
    pub fn on_rejection<F, B>(mut self, f: F) -> Self
    where
        F: Fn(&Rejection) -> Response<B> + Send + Sync + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        self.rejection = Some(Arc::new(move |r| f(r).map(custom_body)));
        self
    }

    /// The metrics label of this layer's locks (see
    /// [`LockRequest::metrics_label`](lock_core::LockRequest::metrics_label)): a bounded name
    /// for the kind of lock, never the rendered key. A `&'static str` is used without copying.
    ///
    /// # Default
    /// The key template (`"item_<id:u64>"`); `"lock-tower"` with a [`key_fn`](Self::key_fn).
    pub fn metrics_label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.family = Some(label.into());
        self
    }

    /// Takes the read side of the name's read-write lock for requests with a safe method
    /// (`GET`, `HEAD`, `OPTIONS`, `TRACE`) and the write side for the others, on the same
    /// key: `GET /items/7` runs beside other `GET`s of item 7, never beside a
    /// `POST /items/7/buy`. Once a write waits, new reads queue behind it, so writes are not
    /// starved. See [`LockClient::read_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
    /// let layer = lock_tower::lock::DistributedLockLayer::builder(client)
    ///     .key("item_<id:u64>")
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
    /// [`BuildError`] for a missing or invalid key template, a placeholder without a type
    /// or with an unknown one, a bad route, a path placeholder (`<id:u64>`,
    /// `<path.id:u64>`) a route lacks or that nothing could fill, a
    /// [`parse_as`](Self::parse_as) without its placeholder, a lease below the minimum, or
    /// [`read_write_by_method`](Self::read_write_by_method) on a client that cannot take
    /// read-write locks (Redlock).
    pub fn build(self) -> Result<DistributedLockLayer, BuildError> {
        let (key, default_family) = match self.key.ok_or(BuildError::NoKey)? {
            Key::Template(text) => (KeySpec::template(&text, self.parse_as)?, Cow::Owned(text)),
            Key::Fn(f) => match self.parse_as.into_iter().next() {
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
        if let Some(&mode) = self
            .hold
            .modes()
            .iter()
            .find(|m| !self.client.supports(**m))
        {
            return Err(BuildError::Unsupported { mode });
        }
        let routes = if self.routes.is_empty() {
            check_path_source(&key, &default_family)?;
            None
        } else {
            Some(Routes::new(&self.routes, &key)?)
        };
        let wait = self.wait.unwrap_or_else(|| default_wait(&self.client));
        Ok(DistributedLockLayer {
            config: Arc::new(Config {
                client: self.client,
                key,
                routes,
                methods: self.methods,
                lease: self.lease,
                wait,
                outage: self.outage,
                on_lost: self.on_lost,
                rejection: self.rejection,
                family: self.family.unwrap_or(default_family),
                hold: self.hold,
                holds: Default::default(),
                warned_unmatched: Default::default(),
                told_misconfigured: Default::default(),
            }),
        })
    }
}

/// The client's wait when shorter than [`LockLayerBuilder::DEFAULT_WAIT`] (a client that
/// waits forever has none), else that.
fn default_wait(client: &LockClient) -> Duration {
    let wait = LockLayerBuilder::DEFAULT_WAIT;
    client.default_wait().map_or(wait, |w| w.min(wait))
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
