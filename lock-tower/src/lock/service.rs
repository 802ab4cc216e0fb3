//! [`DistributedLock`]: the service made by [`DistributedLockLayer`].

use std::sync::Arc;
use std::task::{Context, Poll};
use std::{fmt, mem};

use http::{Request, Response};
use tower_service::Service;

use crate::lock::config::{Config, Plan};
use crate::lock::future::ResponseFuture;
use crate::lock::layer::DistributedLockLayer;
use crate::response::{is_grpc, Rejection, ResponseBody};

/// Takes one distributed lock per request around an inner service; made by
/// [`DistributedLockLayer`]. See the [module docs](crate::lock) for what it answers and when.
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

    crate::inner_service_accessors!();
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
        let grpc = is_grpc(&request);
        let (mut parts, body) = request.into_parts();
        let lock = match self.config.plan(&mut parts) {
            Plan::Lock(name) => self.config.request(name, &parts),
            Plan::Skip => {
                let request = Request::from_parts(parts, body);
                return ResponseFuture::unlocked(self.inner.call(request));
            }
            Plan::Invalid(error) => {
                let rejection = Rejection::from_key_error(error, grpc);
                return ResponseFuture::rejected(rejection, Arc::clone(&self.config));
            }
        };
        // The service that was driven to readiness goes with the request; `self` keeps a
        // clone, which will be polled ready before its own call.
        let clone = self.inner.clone();
        let inner = mem::replace(&mut self.inner, clone);
        let request = Request::from_parts(parts, body);
        ResponseFuture::locked(lock, inner, request, Arc::clone(&self.config), grpc)
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

    use std::time::Duration;

    use super::*;
    use crate::lock::config::Plan;
    use crate::lock::LockLayerBuilder;

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
            .key("item_<id:str>")
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
            .key("item_<query.id:str>")
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
            .key("item_<id:str>:<query.v:str>")
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
            .key("item_<path.id:str>")
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "key placeholder `<path.id>`: route \"/items/{sku}\" has no `{id}` parameter"
        );
        let err = DistributedLockLayer::builder(offline_client())
            .route("/items/{sku}")
            .key("item_<id:str>")
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "key placeholder `<id>`: route \"/items/{sku}\" has no `{id}` parameter"
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

    /// A layer whose kind its client cannot take is refused when built, not answered 500 on
    /// every request: read-write and semaphore layers on a Redlock client.
    #[tokio::test]
    async fn kinds_the_client_cannot_take_are_refused_when_built() {
        let redlock = || {
            let nodes = (1..=3).map(|p| format!("redis://127.0.0.1:{p}"));
            lock_core::LockClient::redlock(nodes)
                .build()
                .expect("lazy client")
        };
        let rw = DistributedLockLayer::builder(redlock())
            .key("k")
            .read_write_by_method()
            .build()
            .unwrap_err();
        assert!(
            matches!(rw, crate::BuildError::Unsupported { mode } if mode == lock_core::LockMode::Read),
            "{rw}"
        );
        DistributedLockLayer::new(redlock(), "k").expect("Redlock takes exclusive locks");
        (DistributedLockLayer::builder(offline_client()).key("k"))
            .read_write_by_method()
            .build()
            .expect("one server takes every kind");
    }

    fn plan(layer: &DistributedLockLayer, uri: &str) -> Plan {
        let (mut parts, ()) = Request::post(uri).body(()).unwrap().into_parts();
        layer.config.plan(&mut parts)
    }

    fn locked_name(plan: Plan) -> String {
        match plan {
            Plan::Lock(name) => String::from_utf8(name.as_bytes().to_vec()).unwrap(),
            Plan::Skip => panic!("passed through unlocked"),
            Plan::Invalid(error) => panic!("refused: {error}"),
        }
    }

    /// The lock bypass: while item 7 is held, no spelling of a request for item 7 may lock
    /// another name (`?id=8` used to fill `<id>` when no route was known).
    #[tokio::test]
    async fn a_request_cannot_steer_a_path_placeholder() {
        let layer = DistributedLockLayer::builder(offline_client())
            .route("/items/{id}/buy")
            .key("item_<id:str>")
            .build()
            .unwrap();
        for uri in [
            "/items/7/buy",
            "/items/7/buy?id=8",
            "/items/7/buy?i%64=8",
            "/items/7/buy?id=8&id=9",
            "/items/%37/buy",
        ] {
            assert_eq!(locked_name(plan(&layer, uri)), "item_7", "{uri}");
        }
        // Spellings the route does not match are not routed to the handler either.
        for uri in ["/items/7/buy/", "/ITEMS/7/buy", "//items/7/buy"] {
            assert!(matches!(plan(&layer, uri), Plan::Skip), "{uri}");
        }
    }

    /// Without routes a bare placeholder is never filled from the query string: with the
    /// `axum` feature a request that no axum route matched passes through unlocked to the
    /// router's 404 (one warning per layer); without it the layer cannot be built.
    #[tokio::test]
    async fn a_bare_placeholder_without_routes_never_reads_the_query() {
        let built = DistributedLockLayer::builder(offline_client())
            .key("item_<id:str>")
            .build();
        #[cfg(feature = "axum")]
        {
            let layer = built.unwrap();
            for _ in 0..2 {
                assert!(
                    matches!(plan(&layer, "/items/7/buy?id=8"), Plan::Skip),
                    "a request outside axum's routes must not be locked by its query"
                );
            }
            assert!((layer.config.warned_unmatched).load(std::sync::atomic::Ordering::Relaxed));
        }
        #[cfg(not(feature = "axum"))]
        assert!(
            matches!(built, Err(crate::BuildError::NoPathParams { .. })),
            "{built:?}"
        );
        // `<query.id>` is for those who mean it.
        let layer = DistributedLockLayer::builder(offline_client())
            .key("item_<query.id:str>")
            .build()
            .unwrap();
        assert_eq!(locked_name(plan(&layer, "/x?id=8")), "item_8");
        assert!(matches!(plan(&layer, "/x?id=8&id=7"), Plan::Invalid(_)));
    }

    #[tokio::test]
    async fn parse_as_locks_one_name_per_value() {
        let layer = DistributedLockLayer::builder(offline_client())
            .route("/items/{id}/buy")
            .key("item_<id>")
            .parse_as::<u64>("id")
            .build()
            .unwrap();
        for uri in ["/items/7/buy", "/items/07/buy", "/items/+7/buy"] {
            assert_eq!(locked_name(plan(&layer, uri)), "item_7", "{uri}");
        }
        match plan(&layer, "/items/x7/buy") {
            Plan::Invalid(error) => {
                assert_eq!(error.to_string(), "key parameter `id` is not a valid u64")
            }
            _ => panic!("an unparsable id must be refused"),
        }
        let err = DistributedLockLayer::builder(offline_client())
            .key("item_<id>")
            .parse_as::<u64>("sku")
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "parse_as(\"sku\"): key template \"item_<id>\" has no `<sku>` placeholder"
        );
    }

    /// HTTP-sized waits: the lock layer waits at most 5 s (less when the client says so),
    /// the semaphore layer answers at once, unless told otherwise.
    #[tokio::test]
    async fn default_waits_are_sized_for_requests() {
        let wait = |layer: &DistributedLockLayer| layer.config.wait;
        let layer = DistributedLockLayer::new(offline_client(), "k").unwrap();
        assert_eq!(wait(&layer), LockLayerBuilder::DEFAULT_WAIT);
        assert_eq!(LockLayerBuilder::DEFAULT_WAIT, Duration::from_secs(5));
        let short = lock_core::LockClient::builder("redis://127.0.0.1:1")
            .wait(Duration::from_millis(300))
            .build()
            .unwrap();
        let layer = DistributedLockLayer::new(short.clone(), "k").unwrap();
        assert_eq!(wait(&layer), Duration::from_millis(300));
        let forever = lock_core::LockClient::builder("redis://127.0.0.1:1")
            .wait_forever()
            .build()
            .unwrap();
        let layer = DistributedLockLayer::new(forever, "k").unwrap();
        assert_eq!(wait(&layer), LockLayerBuilder::DEFAULT_WAIT);
        let chosen = DistributedLockLayer::builder(short)
            .key("k")
            .wait(Duration::from_secs(20))
            .build()
            .unwrap();
        assert_eq!(wait(&chosen), Duration::from_secs(20));
    }

    #[tokio::test]
    async fn custom_rejections_replace_the_defaults() {
        let layer = DistributedLockLayer::builder(offline_client())
            .key("item_<query.id:str>")
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
            r#"{"error":"key parameter `query.id` is missing"}"#
        );
    }

    /// An application's own error type answers rejections: any body, not only `String`
    /// (`expected Response<String>, found Response<Body>` before).
    #[tokio::test]
    async fn custom_rejections_may_be_any_into_response() {
        use axum::response::{IntoResponse, Response as AxumResponse};

        struct AppError(StatusCode, String);
        impl From<&Rejection> for AppError {
            fn from(r: &Rejection) -> Self {
                AppError(StatusCode::UNPROCESSABLE_ENTITY, r.message().to_owned())
            }
        }
        impl IntoResponse for AppError {
            fn into_response(self) -> AxumResponse {
                (self.0, axum::Json(vec![self.1])).into_response()
            }
        }
        let layer = DistributedLockLayer::builder(offline_client())
            .key("item_<query.id:str>")
            .on_rejection(|r| AppError::from(r).into_response())
            .build()
            .unwrap();
        let response = layer
            .layer(service_fn(echo))
            .oneshot(Request::get("/").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(
            text(response.into_body()).await,
            r#"["key parameter `query.id` is missing"]"#
        );
    }
}
