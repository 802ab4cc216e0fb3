//! [`DistributedLockLayer`] and its builder.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Response};
use lock_core::{LockClient, LockClientBuilder, LockName, LockRequest, OnLost, TemplateError};
use tower_layer::Layer;

use crate::key::{decode, KeyError, KeyFn, KeySpec, RequestHead};
use crate::response::{into_response, Rejection, ResponseBody};
use crate::service::DistributedLock;

/// What the layer does when Redis cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutagePolicy {
    /// Answer `503 Service Unavailable` / gRPC `UNAVAILABLE` without calling the inner
    /// service (the default): no request runs unprotected.
    #[default]
    FailClosed,
    /// Call the inner service without the lock, logging a warning. The request then has no
    /// [`LockInfo`](lock_core::LockInfo) extension. For work where availability matters more
    /// than exclusion.
    FailOpen,
}

/// Why a layer could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No [`key`](LockLayerBuilder::key) or [`key_fn`](LockLayerBuilder::key_fn) was given.
    #[error("no lock key: call .key(\"item_<id>\") or .key_fn(…) on the builder")]
    NoKey,
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
    /// A `<path.…>` placeholder names a parameter a route does not have.
    #[error("key placeholder `<path.{param}>`: route {route:?} has no `{{{param}}}` parameter")]
    MissingPathParam {
        /// The route template.
        route: String,
        /// The parameter.
        param: String,
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
}

type RejectionFn = Arc<dyn Fn(&Rejection) -> Response<String> + Send + Sync + 'static>;

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
    config: Arc<Config>,
}

impl DistributedLockLayer {
    /// How long a request waits for a busy lock by default: a few seconds, so that
    /// requests for the same key queue briefly instead of failing at once.
    pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);

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
            routes: Vec::new(),
            methods: Vec::new(),
            lease: None,
            wait: Self::DEFAULT_WAIT,
            outage: OutagePolicy::FailClosed,
            on_lost: OnLost::Abort,
            rejection: None,
            family: None,
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
    routes: Vec<String>,
    methods: Vec<Method>,
    lease: Option<Duration>,
    wait: Duration,
    outage: OutagePolicy,
    on_lost: OnLost,
    rejection: Option<RejectionFn>,
    family: Option<String>,
}

enum Key {
    Template(String),
    Fn(KeyFn),
}

impl LockLayerBuilder {
    /// The lock name as a key template, in the grammar of `#[distributed_lock]`:
    /// - `<id>`: the path parameter `id` of the matched [route](Self::route), else the query
    ///   parameter `id`;
    /// - `<path.id>`, `<query.id>`, `<header.x-tenant>`: only that source (gRPC metadata are
    ///   headers);
    /// - `<<` is a literal `<`; values are percent-encoded, so distinct requests never share
    ///   a name.
    ///
    /// A missing, empty or undecodable value answers `400` / `INVALID_ARGUMENT` naming the
    /// parameter, without a lock attempt. Replaces an earlier [`key_fn`](Self::key_fn).
    ///
    /// Path parameters come from the layer's own [`route`](Self::route) templates: without
    /// one, `<id>` can only come from the query string. Give the layer the route's template
    /// (`/items/{id}/buy`) even when it is an axum `route_layer`.
    pub fn key(mut self, template: impl Into<String>) -> Self {
        self.key = Some(Key::Template(template.into()));
        self
    }

    /// The lock name computed by a function of the request head, for anything a template
    /// cannot express. Return a [`KeyError`] to answer `400` / `INVALID_ARGUMENT`.
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
    /// that match no route pass through unlocked.
    ///
    /// # Default
    /// No route: every request is locked, and `<id>` reads the query string only.
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
    /// [`DistributedLockLayer::DEFAULT_WAIT`] (3 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
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

    /// The metrics label of this layer's locks (see [`LockRequest::family`]): a bounded
    /// name for the kind of lock, never the rendered key.
    ///
    /// # Default
    /// The key template (`"item_<id>"`); `"lock-tower"` with a [`key_fn`](Self::key_fn).
    pub fn family(mut self, family: impl Into<String>) -> Self {
        self.family = Some(family.into());
        self
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Errors
    /// [`BuildError`] for a missing or invalid key template, a bad route, a `<path.x>`
    /// placeholder a route lacks, or a lease below the minimum.
    pub fn build(self) -> Result<DistributedLockLayer, BuildError> {
        let (key, default_family) = match self.key.ok_or(BuildError::NoKey)? {
            Key::Template(text) => (KeySpec::template(&text)?, text),
            Key::Fn(f) => (KeySpec::Fn(f), "lock-tower".to_owned()),
        };
        let family = Cow::Owned(self.family.unwrap_or(default_family));
        if let Some(lease) = self.lease.filter(|l| *l < LockClientBuilder::MIN_LEASE) {
            return Err(BuildError::Lease { lease });
        }
        let routes = if self.routes.is_empty() {
            None
        } else {
            let mut router = matchit::Router::new();
            for route in &self.routes {
                let params = route_params(route);
                if let Some(param) = key.required_path_params().find(|p| !params.contains(p)) {
                    return Err(BuildError::MissingPathParam {
                        route: route.clone(),
                        param: param.to_owned(),
                    });
                }
                router
                    .insert(route.as_str(), ())
                    .map_err(|e| BuildError::Route {
                        route: route.clone(),
                        reason: e.to_string(),
                    })?;
            }
            Some(router)
        };
        Ok(DistributedLockLayer {
            config: Arc::new(Config {
                client: self.client,
                key,
                routes,
                route_list: self.routes,
                methods: self.methods,
                lease: self.lease,
                wait: self.wait,
                outage: self.outage,
                on_lost: self.on_lost,
                rejection: self.rejection,
                family,
            }),
        })
    }
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

/// The header that carries a request id (as tower-http's `SetRequestIdLayer` sets it).
const REQUEST_ID: &str = "x-request-id";

/// The request's id, when it has a readable one of sane length (it is stored in Redis).
fn request_id<B>(request: &http::Request<B>) -> Option<&str> {
    let id = request.headers().get(REQUEST_ID)?.to_str().ok()?;
    (!id.is_empty() && id.len() <= 128).then_some(id)
}

/// The parameter names of an axum/matchit route template (`{id}`, `{*rest}`; `{{` escapes).
fn route_params(route: &str) -> Vec<&str> {
    let mut params = Vec::new();
    let mut rest = route;
    while let Some(open) = rest.find('{') {
        if rest[open + 1..].starts_with('{') {
            rest = &rest[open + 2..];
            continue;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        params.push(rest[open + 1..open + close].trim_start_matches('*'));
        rest = &rest[open + close + 1..];
    }
    params
}

/// The settings a layer shares with its services.
pub(crate) struct Config {
    client: LockClient,
    key: KeySpec,
    routes: Option<matchit::Router<()>>,
    route_list: Vec<String>,
    methods: Vec<Method>,
    lease: Option<Duration>,
    wait: Duration,
    pub(crate) outage: OutagePolicy,
    pub(crate) on_lost: OnLost,
    rejection: Option<RejectionFn>,
    family: Cow<'static, str>,
}

/// What the layer does with one request.
pub(crate) enum Plan {
    /// No route or method matches: call the inner service without a lock.
    Skip,
    /// Lock this name.
    Lock(LockName),
    /// No name could be made.
    Invalid(KeyError),
}

impl Config {
    /// Matches the routes and renders the lock name of `request`.
    pub(crate) fn plan<B>(&self, request: &http::Request<B>) -> Plan {
        if !self.methods.is_empty() && !self.methods.contains(request.method()) {
            return Plan::Skip;
        }
        let mut params = Vec::new();
        if let Some(router) = &self.routes {
            let Ok(matched) = router.at(request.uri().path()) else {
                return Plan::Skip;
            };
            for (name, raw) in matched.params.iter() {
                match decode(raw, false) {
                    Ok(value) => params.push((name.to_owned(), value)),
                    Err(reason) => return Plan::Invalid(KeyError::new(name, reason)),
                }
            }
        }
        match self.key.resolve(request, &params) {
            Ok(name) => Plan::Lock(name),
            Err(error) => Plan::Invalid(error),
        }
    }

    /// The lock request for `name` with this layer's lease, wait, on-lost and family
    /// settings; the request's `x-request-id`, if any, is recorded with the hold.
    pub(crate) fn request<B>(&self, name: LockName, request: &http::Request<B>) -> LockRequest {
        let mut lock = (self.client.lock(name).wait(self.wait))
            .on_lost(self.on_lost)
            .family(self.family.clone());
        if let Some(id) = request_id(request) {
            lock = lock.request_id(id);
        }
        match self.lease {
            Some(lease) => lock.lease(lease),
            None => lock,
        }
    }

    /// The answer to a rejection.
    pub(crate) fn reject<B>(&self, rejection: &Rejection) -> Response<ResponseBody<B>> {
        tracing::debug!(kind = ?rejection.kind(), %rejection, "request rejected by the lock layer");
        into_response(match &self.rejection {
            Some(f) => f(rejection),
            None => rejection.default_response(),
        })
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("key", &self.key)
            .field("routes", &self.route_list)
            .field("methods", &self.methods)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("outage", &self.outage)
            .field("on_lost", &self.on_lost)
            .field("family", &self.family)
            .field("custom_rejection", &self.rejection.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_params_are_found() {
        assert_eq!(route_params("/items/{id}/buy"), ["id"]);
        assert_eq!(route_params("/a/{x}/{*rest}"), ["x", "rest"]);
        assert_eq!(route_params("/lit/{{x}}/{y}"), ["y"]);
        assert!(route_params("/orders.Orders/Place").is_empty());
    }
}
