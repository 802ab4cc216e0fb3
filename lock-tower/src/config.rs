//! The settings a layer shares with its services, and what they decide for one request.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Response};
use lock_core::{LockClient, LockName, LockRequest, OnLost};

use crate::key::{KeyError, KeySpec};
use crate::response::{into_response, Rejection, ResponseBody};
#[cfg(feature = "axum")]
use crate::route::AxumRoutes;
use crate::route::Routes;

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

/// A custom rejection answer.
pub(crate) type RejectionFn = Arc<dyn Fn(&Rejection) -> Response<String> + Send + Sync + 'static>;

/// The settings a layer shares with its services.
pub(crate) struct Config {
    pub(crate) client: LockClient,
    pub(crate) key: KeySpec,
    /// `None`: every request is locked.
    pub(crate) routes: Option<Routes>,
    /// Without routes: the routes axum matched.
    #[cfg(feature = "axum")]
    pub(crate) axum_routes: AxumRoutes,
    pub(crate) methods: Vec<Method>,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) outage: OutagePolicy,
    pub(crate) on_lost: OnLost,
    pub(crate) rejection: Option<RejectionFn>,
    pub(crate) family: Cow<'static, str>,
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
        #[cfg(feature = "axum")]
        let axum_route = match self.routes {
            Some(_) => None,
            None => self.axum_routes.matched(request),
        };
        let found = match &self.routes {
            Some(routes) => match routes.at(request.uri().path()) {
                None => return Plan::Skip,
                found => found,
            },
            #[cfg(feature = "axum")]
            None => axum_route.as_ref().and_then(|(route, path)| route.at(path)),
            #[cfg(not(feature = "axum"))]
            None => None,
        };
        let params = match found {
            None => None,
            Some(Ok(params)) => Some(params),
            Some(Err(error)) => return Plan::Invalid(error),
        };
        match self.key.resolve(request, params.as_deref()) {
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

/// The header that carries a request id (as tower-http's `SetRequestIdLayer` sets it).
const REQUEST_ID: &str = "x-request-id";

/// The request's id, when it has a readable one of sane length (it is stored in Redis).
fn request_id<B>(request: &http::Request<B>) -> Option<&str> {
    let id = request.headers().get(REQUEST_ID)?.to_str().ok()?;
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
            .field("custom_rejection", &self.rejection.is_some())
            .finish_non_exhaustive()
    }
}
