//! The settings a layer shares with its services, and what they decide for one request.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Method, Response, StatusCode};
use lock_core::{LockClient, LockError, LockMode, LockName, LockRequest, OnLost};

use crate::key::route::Routes;
use crate::key::{KeyError, KeySpec};
use crate::response::{into_response, CustomBody, Rejection, ResponseBody};
use crate::retry::HoldTimes;

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

/// What the layer holds for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// The exclusive lock of the name.
    Exclusive,
    /// The read lock for safe methods (GET, HEAD, OPTIONS, TRACE), the write lock for the
    /// others.
    ReadWriteByMethod,
    /// One of `permits` permits of the name's semaphore; a full one is answered `full`.
    /// Only the semaphore layer (feature `semaphore`) makes it.
    #[cfg_attr(not(feature = "semaphore"), expect(dead_code))]
    Permit { permits: u32, full: StatusCode },
}

impl Hold {
    /// The kinds of hold its requests take.
    pub(crate) fn modes(&self) -> &'static [LockMode] {
        match self {
            Self::Exclusive => &[LockMode::Exclusive],
            Self::ReadWriteByMethod => &[LockMode::Read, LockMode::Write],
            Self::Permit { .. } => &[LockMode::Permit],
        }
    }
}

/// A custom rejection answer, its body boxed.
pub(crate) type RejectionFn =
    Arc<dyn Fn(&Rejection) -> Response<CustomBody> + Send + Sync + 'static>;

/// The settings a layer shares with its services.
pub(crate) struct Config {
    pub(crate) client: LockClient,
    pub(crate) key: KeySpec,
    /// `None`: every request is locked, with the path parameters of the route axum matched
    /// (`axum` feature) or none.
    pub(crate) routes: Option<Routes>,
    pub(crate) methods: Vec<Method>,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) outage: OutagePolicy,
    pub(crate) on_lost: OnLost,
    pub(crate) rejection: Option<RejectionFn>,
    pub(crate) family: Cow<'static, str>,
    pub(crate) hold: Hold,
    /// What this layer's requests held their locks for: the `Retry-After` estimate.
    pub(crate) holds: HoldTimes,
    /// Set once the layer warned of requests that matched no axum route.
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) warned_unmatched: AtomicBool,
    /// Set once the layer wrote a misconfiguration to stderr.
    pub(crate) told_misconfigured: AtomicBool,
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
    /// Matches the routes and renders the lock name of the request.
    pub(crate) fn plan(&self, parts: &mut Parts) -> Plan {
        if !self.methods.is_empty() && !self.methods.contains(&parts.method) {
            return Plan::Skip;
        }
        let name = match &self.routes {
            Some(routes) => match routes.at(parts.uri.path()) {
                None => return Plan::Skip,
                Some(Err(error)) => Err(error),
                Some(Ok(params)) => self.key.resolve(parts, Some(&params)).map(Some),
            },
            None => self.resolve_without_routes(parts),
        };
        match name {
            Ok(Some(name)) => Plan::Lock(name),
            Ok(None) => Plan::Skip,
            Err(error) => {
                if error.is_misconfiguration() {
                    self.log_misconfiguration(parts, &error);
                }
                Plan::Invalid(error)
            }
        }
    }

    /// Path parameters from the route axum matched; `None` when the request matched no
    /// route and the key needs one.
    #[cfg(feature = "axum")]
    fn resolve_without_routes(&self, parts: &mut Parts) -> Result<Option<LockName>, KeyError> {
        use crate::key::route::axum_route::{matched, Matched};
        match matched(parts) {
            // A path placeholder cannot be filled: the layer sits on a whole `Router`
            // (`.layer` rather than `.route_layer`) and this request found no route. It goes
            // on to the router's 404, unlocked, with one warning per layer.
            Matched::None if self.key.path_params().next().is_some() => {
                self.warn_unmatched(parts);
                Ok(None)
            }
            Matched::None => self.key.resolve(parts, None).map(Some),
            Matched::Params(raw) => {
                let params: Vec<_> = raw.iter().map(|(k, v)| (k, Cow::Borrowed(v))).collect();
                self.key.resolve(parts, Some(&params)).map(Some)
            }
            Matched::InvalidUtf8 => match self.key.path_params().next() {
                Some((placeholder, _)) => Err(KeyError::new(
                    placeholder,
                    "is not valid UTF-8 once percent-decoded",
                )),
                None => self.key.resolve(parts, None).map(Some),
            },
        }
    }

    /// Once per layer: requests that matched no route are not locked.
    #[cfg(feature = "axum")]
    fn warn_unmatched(&self, parts: &Parts) {
        if (self.warned_unmatched).swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        tracing::warn!(
            family = %self.family,
            path = parts.uri.path(),
            "a request that matched no axum route passed the lock layer unlocked (to the \
             router's 404); expected with `Router::layer`, where unmatched paths reach the \
             fallback. If this layer wraps the whole Router from outside, it never sees a \
             route and never locks: use `route_layer`, or give the layer `.route(…)` \
             (logged once per layer)"
        );
    }

    /// No path parameters (the builder refuses path placeholders here).
    #[cfg(not(feature = "axum"))]
    fn resolve_without_routes(&self, parts: &mut Parts) -> Result<Option<LockName>, KeyError> {
        self.key.resolve(parts, None).map(Some)
    }

    /// A placeholder no request can fill on this route: the server's mistake, which the
    /// operator must hear of, with or without a tracing subscriber (an `error` event each
    /// time, and stderr once per layer); the client only gets a generic `500`.
    fn log_misconfiguration(&self, parts: &Parts, error: &KeyError) {
        const NO_ROUTE: &str = "(no route matched before the layer)";
        const FIX: &str = "its key template needs a path parameter this route does not have \
            (use `route_layer` on routes that define it, or give the layer `.route(…)`, which \
            checks the template against the route when the layer is built)";
        #[cfg(feature = "axum")]
        let route = crate::key::route::axum_route::template(parts).unwrap_or(NO_ROUTE);
        // Without axum no route is known: the request tells nothing more.
        #[cfg(not(feature = "axum"))]
        let route = {
            let _ = parts;
            NO_ROUTE
        };
        tracing::error!(
            distlock.lock.template = &*self.family,
            template = ?self.key,
            route,
            %error,
            "lock layer misconfigured: {FIX}"
        );
        if !(self.told_misconfigured).swap(true, std::sync::atomic::Ordering::Relaxed) {
            // Once: a layer that cannot lock this route answers 500 to each request.
            eprintln!(
                "lock-tower: the lock layer `{}` is misconfigured on route {route}: {error}; {FIX} \
                 (each such request is answered 500; written once)",
                self.family
            );
        }
    }

    /// The lock request for `name` with this layer's lease, wait, on-lost and family
    /// settings; the request's `x-request-id`, if any, is recorded with the hold.
    pub(crate) fn request(&self, name: LockName, request: &Parts) -> LockRequest {
        let lock = match self.hold {
            Hold::Exclusive => self.client.lock(name),
            Hold::ReadWriteByMethod if is_safe(&request.method) => self.client.read_lock(name),
            Hold::ReadWriteByMethod => self.client.write_lock(name),
            Hold::Permit { permits, .. } => self.client.semaphore(name, permits),
        };
        let mut lock = lock
            .on_lost(self.on_lost)
            .metrics_label(self.family.clone());
        if let Some(id) = request_id(request) {
            lock = lock.request_id(id);
        }
        lock = lock.wait(self.wait);
        match self.lease {
            Some(lease) => lock.lease(lease),
            None => lock,
        }
    }

    /// The rejection for a lock error, with the `Retry-After` estimate when it is busy.
    pub(crate) fn lock_rejection(&self, error: lock_core::LockError, grpc: bool) -> Rejection {
        let retry_after = error
            .is_wait_timeout()
            .then(|| (self.holds).retry_after(&error, self.wait, std::time::SystemTime::now()));
        let full = match self.hold {
            Hold::Permit { full, .. } => Some(full),
            _ => None,
        };
        Rejection::from_lock_error(error, grpc, &self.family, retry_after, full)
    }

    /// The answer to a rejection. The client sees a generic message; the full error (the
    /// holder of a busy lock, the Redis error) goes to the log.
    pub(crate) fn reject<B>(&self, rejection: &Rejection) -> Response<ResponseBody<B>> {
        // The lock error names the lock: only when the client opted in.
        let names = self.client.traces_lock_names();
        let lock_error = rejection.lock_error();
        tracing::debug!(
            distlock.lock.template = &*self.family,
            distlock.lock.name = lock_error.and_then(LockError::name).filter(|_| names).map(display),
            kind = ?rejection.kind(),
            answer = %rejection,
            distlock.error.class = lock_error.map(LockError::class),
            lock_error = lock_error.filter(|_| names).map(display),
            key_error = rejection.key_error().map(display),
            "request rejected by the lock layer"
        );
        match &self.rejection {
            Some(f) => f(rejection).map(ResponseBody::custom),
            None => into_response(rejection.default_response()),
        }
    }
}

/// Methods that only read (RFC 9110's safe methods): they take the read lock.
fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The header that carries a request id (as tower-http's `SetRequestIdLayer` sets it).
const REQUEST_ID: &str = "x-request-id";

/// The request's id, when it has a readable one of sane length (it is stored in Redis).
fn request_id(request: &Parts) -> Option<&str> {
    let id = request.headers.get(REQUEST_ID)?.to_str().ok()?;
    (!id.is_empty() && id.len() <= 128).then_some(id)
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("key", &self.key)
            .field("own_routes", &self.routes.is_some())
            .field("methods", &self.methods)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("outage", &self.outage)
            .field("on_lost", &self.on_lost)
            .field("family", &self.family)
            .field("hold", &self.hold)
            .field("custom_rejection", &self.rejection.is_some())
            .finish_non_exhaustive()
    }
}
