//! The layer's own answers: generic texts (never the holder, a host or a Redis address),
//! plain text for HTTP, trailers-only for gRPC.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use crate::idempotency::body::Buffered;
use crate::response::grpc_status;

/// The header that marks a replayed response.
pub const REPLAYED_HEADER: &str = "idempotency-replayed";

/// gRPC status codes the layer answers with.
pub(crate) mod code {
    pub(crate) const INVALID_ARGUMENT: u8 = 3;
    pub(crate) const ALREADY_EXISTS: u8 = 6;
    pub(crate) const RESOURCE_EXHAUSTED: u8 = 8;
    pub(crate) const FAILED_PRECONDITION: u8 = 9;
    pub(crate) const ABORTED: u8 = 10;
    pub(crate) const INTERNAL: u8 = 13;
    pub(crate) const UNAVAILABLE: u8 = 14;
}

/// One answer: HTTP status, gRPC code, text and `Retry-After`.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) grpc: u8,
    pub(crate) message: String,
    pub(crate) retry_after: Option<Duration>,
}

impl Answer {
    pub(crate) fn new(status: StatusCode, grpc: u8, message: impl Into<String>) -> Self {
        Self {
            status,
            grpc,
            message: message.into(),
            retry_after: None,
        }
    }

    pub(crate) fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The response, for a gRPC request when `grpc`.
    pub(crate) fn into_response(self, grpc: bool) -> Response<Buffered> {
        let mut response = if grpc {
            grpc_status(i32::from(self.grpc), &self.message).map(|_| Buffered::default())
        } else {
            let mut response = Response::new(Buffered {
                data: Bytes::from(format!("{}\n", self.message)),
                trailers: None,
            });
            *response.status_mut() = self.status;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        };
        if let Some(after) = self.retry_after {
            let value = HeaderValue::from(after.as_secs());
            response.headers_mut().insert(RETRY_AFTER, value);
        }
        response
    }
}
