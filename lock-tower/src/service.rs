//! [`DistributedLock`]: the service made by [`DistributedLockLayer`].

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::config::{Config, Plan};
use crate::future::ResponseFuture;
use crate::layer::DistributedLockLayer;
use crate::response::{is_grpc, Rejection, ResponseBody};

/// Takes one distributed lock per request around an inner service; made by
/// [`DistributedLockLayer`]. See the [crate docs](crate) for what it answers and when.
#[derive(Clone)]
pub struct DistributedLock<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> DistributedLock<S> {
    /// Wraps `inner` with the settings of `layer` (the same as `layer.layer(inner)`).
    pub fn new(inner: S, layer: &DistributedLockLayer) -> Self {
        tower_layer::Layer::layer(layer, inner)
    }

    pub(crate) fn from_config(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for DistributedLock<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedLock")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for DistributedLock<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        match self.config.plan(&request) {
            Plan::Skip => ResponseFuture::unlocked(self.inner.call(request)),
            Plan::Invalid(error) => {
                let rejection = Rejection::from_key_error(error, is_grpc(&request));
                ResponseFuture::rejected(rejection, Arc::clone(&self.config))
            }
            Plan::Lock(name) => {
                // The service that was driven to readiness goes with the request; `self`
                // keeps a clone, which will be polled ready before its own call.
                let clone = self.inner.clone();
                let inner = mem::replace(&mut self.inner, clone);
                let grpc = is_grpc(&request);
                let lock = self.config.request(name, &request);
                ResponseFuture::locked(lock, inner, request, Arc::clone(&self.config), grpc)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http::StatusCode;
    use http_body_util::{BodyExt, Full};
    use tower::{service_fn, ServiceBuilder, ServiceExt};
    use tower_layer::Layer;

    use super::*;

    /// A client whose Redis is never contacted: these requests are decided before any lock.
    fn offline_client() -> lock_core::LockClient {
        lock_core::LockClient::new("redis://127.0.0.1:1").expect("lazy client")
    }

    async fn echo(request: Request<()>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(Response::new(Full::from(request.uri().path().to_owned())))
    }

    async fn text<B: http_body::Body<Data = Bytes>>(body: B) -> String
    where
        B::Error: std::fmt::Debug,
    {
        let bytes = body.collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn unmatched_routes_pass_through_unlocked() {
        let layer = DistributedLockLayer::builder(offline_client())
            .route("/items/{id}/buy")
            .key("item_<id>")
            .build()
            .unwrap();
        let service = ServiceBuilder::new().layer(layer).service(service_fn(echo));
        let request = Request::get("/health").body(()).unwrap();
        let response = service.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(text(response.into_body()).await, "/health");
    }

    #[tokio::test]
    async fn other_methods_pass_through_unlocked() {
        let layer = DistributedLockLayer::builder(offline_client())
            .key("item_<id>")
            .method(http::Method::POST)
            .build()
            .unwrap();
        let service = layer.layer(service_fn(echo));
        // No `id` anywhere: a locked request would be answered 400.
        let response = service
            .clone()
            .oneshot(Request::get("/x").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let response = service
            .oneshot(Request::post("/x").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn invalid_keys_are_answered_without_calling_the_service() {
        let layer = DistributedLockLayer::builder(offline_client())
            .route("/items/{id}/buy")
            .key("item_<id>:<query.v>")
            .build()
            .unwrap();
        let called = service_fn(|_: Request<()>| async {
            panic!("the inner service must not be called");
            #[allow(unreachable_code)]
            Ok::<Response<Full<Bytes>>, Infallible>(Response::new(Full::default()))
        });
        let service = layer.layer(called);
        let request = Request::post("/items/7/buy").body(()).unwrap();
        let response = service.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            text(response.into_body()).await,
            "key parameter `query.v` is missing\n"
        );
        let grpc = Request::post("/items/7/buy")
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let response = service.oneshot(grpc).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "3");
    }

    #[tokio::test]
    async fn build_errors_name_the_problem() {
        let err = DistributedLockLayer::builder(offline_client())
            .route("/items/{sku}")
            .key("item_<path.id>")
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "key placeholder `<path.id>`: route \"/items/{sku}\" has no `{id}` parameter"
        );
        let err = DistributedLockLayer::builder(offline_client())
            .build()
            .unwrap_err();
        assert!(matches!(err, crate::BuildError::NoKey));
        let err = DistributedLockLayer::builder(offline_client())
            .key("k")
            .lease(std::time::Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(matches!(err, crate::BuildError::Lease { .. }), "{err}");
        let err = DistributedLockLayer::builder(offline_client())
            .key("k")
            .route("/a/{x}")
            .route("/a/{y}")
            .build()
            .unwrap_err();
        assert!(matches!(err, crate::BuildError::Route { .. }), "{err}");
    }

    #[tokio::test]
    async fn custom_rejections_replace_the_defaults() {
        let layer = DistributedLockLayer::builder(offline_client())
            .key("item_<id>")
            .on_rejection(|rejection| {
                let mut response = rejection.default_response();
                *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
                *response.body_mut() = format!("{{\"error\":{:?}}}", rejection.message());
                response
            })
            .build()
            .unwrap();
        let service = layer.layer(service_fn(echo));
        let response = service
            .oneshot(Request::get("/").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            text(response.into_body()).await,
            r#"{"error":"key parameter `id` is missing (no route matched the request path, so it was looked up in the query string only)"}"#
        );
    }
}
