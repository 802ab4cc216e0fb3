//! [`Idempotent`]: the service made by [`IdempotencyLayer`].

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::idempotency::body::{IdempotencyBody, RebuildBody};
use crate::idempotency::config::{Config, Plan};
use crate::idempotency::future::IdempotencyFuture;
use crate::idempotency::layer::IdempotencyLayer;
use crate::idempotency::steps::prepare;
use crate::response::is_grpc;

/// Runs each request with an idempotency key once and replays its stored response; made
/// by [`IdempotencyLayer`].
#[derive(Clone)]
pub struct Idempotent<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Idempotent<S> {
    /// Wraps `inner` with the settings of `layer` (the same as `layer.layer(inner)`).
    pub fn new(inner: S, layer: &IdempotencyLayer) -> Self {
        tower_layer::Layer::layer(layer, inner)
    }

    pub(crate) fn from_config(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    crate::inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for Idempotent<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotent")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Idempotent<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ReqBody: RebuildBody + Send + 'static,
    ReqBody::Data: Send,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Send,
{
    type Response = Response<IdempotencyBody<ResBody>>;
    type Error = S::Error;
    type Future = IdempotencyFuture<S, ReqBody, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let grpc = is_grpc(&request);
        let (parts, body) = request.into_parts();
        let name = match self.config.plan(&parts) {
            Plan::Skip => {
                let request = Request::from_parts(parts, body);
                return IdempotencyFuture::passing(self.inner.call(request));
            }
            Plan::Refuse(answer) => return IdempotencyFuture::answered(answer.into_response(grpc)),
            Plan::Key(name) => name,
        };
        let prepare = prepare(Arc::clone(&self.config), name, parts, body, grpc);
        // The service that was driven to readiness goes with the request; `self` keeps a
        // clone, which will be polled ready before its own call.
        let clone = self.inner.clone();
        let inner = mem::replace(&mut self.inner, clone);
        IdempotencyFuture::preparing(Box::pin(prepare), inner, Arc::clone(&self.config), grpc)
    }
}
