//! Rejections: why the layer answered a request itself (busy, bad key, outage, lost, full),
//! and their default answers.

use std::fmt;
use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use lock_core::{Answer, LockError};

use crate::key::KeyError;
use crate::response::grpc_status;

/// Why the layer answered a request itself instead of calling the inner service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectionKind {
    /// The lock stayed busy for the whole wait.
    ///
    /// # Default
    /// `409 Conflict` with [`Retry-After`](crate::lock#retry-after); gRPC `ABORTED`. The body
    /// names the lock's family (``lock `item_<id>` is busy``), not its holder.
    Busy,
    /// A key parameter is missing, empty, repeated or invalid (or the rendered name is too
    /// long); no lock was attempted.
    ///
    /// # Default
    /// `400 Bad Request`; gRPC `INVALID_ARGUMENT`. The message names the parameter.
    InvalidKey,
    /// Redis could not be reached or did not answer in time, and the layer fails closed.
    ///
    /// # Default
    /// `503 Service Unavailable` with `Retry-After: 5`
    /// ([`Answer::UNAVAILABLE_RETRY_AFTER`]); gRPC `UNAVAILABLE`. Also when the client was
    /// [shut down](lock_core::LockClient::shutdown).
    Unavailable,
    /// The lock was lost while the inner service ran, and the layer aborts on loss.
    ///
    /// # Default
    /// `503 Service Unavailable`; gRPC `ABORTED`.
    Lost,
    /// No permit of a [semaphore layer](crate::semaphore::DistributedSemaphoreLayer)'s semaphore freed
    /// within the wait: the concurrency limit is reached.
    ///
    /// # Default
    /// `429 Too Many Requests` (or the layer's
    /// [`when_full`](crate::semaphore::SemaphoreLayerBuilder::when_full) status, e.g. `503`) with
    /// [`Retry-After`](crate::lock#retry-after); gRPC `RESOURCE_EXHAUSTED`. The body names the
    /// family (``limit `tenant_<header.x-tenant>` is reached``), not the holders.
    Full,
    /// The server's fault: a path placeholder that the matched route does not define
    /// ([`KeyError::is_misconfiguration`]: no lock was attempted; logged at `error`, and
    /// once to stderr), or any other lock error (Redis refusing the command, say).
    ///
    /// # Default
    /// `500 Internal Server Error`; gRPC `INTERNAL`. The message is generic.
    Internal,
}

/// A request the layer answers itself. Handed to a custom
/// [rejection function](crate::lock::LockLayerBuilder::on_rejection); the defaults are
/// [`default_response`](Self::default_response).
#[derive(Debug)]
pub struct Rejection {
    kind: RejectionKind,
    grpc: bool,
    message: String,
    retry_after: Option<Duration>,
    /// The HTTP status of a [`RejectionKind::Full`] answer.
    full_status: StatusCode,
    key_error: Option<KeyError>,
    lock_error: Option<LockError>,
}

/// The gRPC status of a full semaphore (the one answer lock-core's [`Answer`] has not).
const GRPC_RESOURCE_EXHAUSTED: i32 = 8;

/// The error type of response bodies: any error, boxed (as axum's and tonic's).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Rejection {
    pub(crate) fn from_key_error(error: KeyError, grpc: bool) -> Self {
        // The layer's fault, not the client's: the details are in the error log.
        let (kind, message) = if error.is_misconfiguration() {
            let message = "the lock layer cannot make a lock key on this route";
            (RejectionKind::Internal, message.to_owned())
        } else {
            (RejectionKind::InvalidKey, error.to_string())
        };
        Self {
            kind,
            grpc,
            message,
            retry_after: None,
            full_status: StatusCode::TOO_MANY_REQUESTS,
            key_error: Some(error),
            lock_error: None,
        }
    }

    /// A rejection for a lock error; `retry_after` is the hint for a busy lock, and
    /// `full_status`, for a semaphore's layer, the status of a full semaphore (else a busy
    /// lock is [`Busy`](RejectionKind::Busy)). The message for the client is generic: the
    /// error (which names the holder: service, host, pid, request id) stays with
    /// [`lock_error`](Self::lock_error) and the logs.
    pub(crate) fn from_lock_error(
        error: LockError,
        grpc: bool,
        family: &str,
        retry_after: Option<Duration>,
        full_status: Option<StatusCode>,
    ) -> Self {
        // lock-core's classes; the messages name the family where it helps the client.
        let answer = error.answer();
        let (kind, message) = match answer {
            Answer::Busy if full_status.is_some() => {
                (RejectionKind::Full, format!("limit `{family}` is reached"))
            }
            Answer::Busy => (RejectionKind::Busy, format!("lock `{family}` is busy")),
            Answer::Lost => (
                RejectionKind::Lost,
                format!("lock `{family}` was lost while the request ran"),
            ),
            Answer::Unavailable => (RejectionKind::Unavailable, answer.message().to_owned()),
            Answer::InvalidName => (RejectionKind::InvalidKey, answer.message().to_owned()),
            _ => (RejectionKind::Internal, answer.message().to_owned()),
        };
        let retry_after = match kind {
            RejectionKind::Busy | RejectionKind::Full => retry_after,
            // The same hint as lock-core's answer to this error.
            _ => error.retry_after(),
        };
        Self {
            kind,
            grpc,
            message,
            retry_after,
            full_status: full_status.unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            key_error: None,
            lock_error: Some(error),
        }
    }

    /// What happened.
    pub fn kind(&self) -> RejectionKind {
        self.kind
    }

    /// True when the request is a gRPC call (`content-type: application/grpc…`), to be
    /// answered with a gRPC status.
    pub fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// A lowercase message for the client: the key parameter at fault, or the lock's
    /// [metrics label](crate::lock::LockLayerBuilder::metrics_label) — never who holds the lock, a host or a
    /// Redis address (those are in [`lock_error`](Self::lock_error) and the logs).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// When to retry, in whole seconds (at least 1): for [`RejectionKind::Busy`] and
    /// [`RejectionKind::Full`] the layer's estimate (see [`Retry-After`](crate::lock#retry-after)),
    /// for [`RejectionKind::Unavailable`] lock-core's
    /// [`Answer::UNAVAILABLE_RETRY_AFTER`] (as [`LockError::retry_after`]).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The key error behind a rejection made before any lock was attempted: an
    /// [`InvalidKey`](RejectionKind::InvalidKey), or an [`Internal`](RejectionKind::Internal)
    /// one for a [misconfiguration](KeyError::is_misconfiguration).
    pub fn key_error(&self) -> Option<&KeyError> {
        self.key_error.as_ref()
    }

    /// The lock error behind the rejection, if it came from the lock.
    pub fn lock_error(&self) -> Option<&LockError> {
        self.lock_error.as_ref()
    }

    /// The default answer (see [`RejectionKind`]): plain text for HTTP, a trailers-only
    /// response (`grpc-status`, `grpc-message` in the headers, empty body) for gRPC.
    pub fn default_response(&self) -> Response<String> {
        let answer = self.kind.answer();
        if self.grpc {
            let code = answer.map_or(GRPC_RESOURCE_EXHAUSTED, Answer::grpc_code);
            return grpc_status(code, &self.message);
        }
        let status = match answer {
            Some(answer) => StatusCode::from_u16(answer.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            None => self.full_status,
        };
        let mut response = Response::new(format!("{}\n", self.message));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(after) = self.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(after.as_secs()));
        }
        response
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl RejectionKind {
    /// lock-core's class of the kind, whose status and code it answers with; `None` for a
    /// full semaphore, which only the layer knows.
    fn answer(self) -> Option<Answer> {
        Some(match self {
            Self::Busy => Answer::Busy,
            Self::Full => return None,
            Self::InvalidKey => Answer::InvalidName,
            Self::Unavailable => Answer::Unavailable,
            Self::Lost => Answer::Lost,
            Self::Internal => Answer::Internal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(r: &Rejection) -> (StatusCode, http::HeaderMap) {
        let response = r.default_response();
        (response.status(), response.headers().clone())
    }

    fn wait_timeout(remaining_ttl: Option<Duration>) -> LockError {
        LockError::WaitTimeout {
            name: "item_7".into(),
            waited: Duration::from_millis(200),
            remaining_ttl,
            holder: None,
        }
    }

    /// The default busy answer names the family, never the holder.
    #[test]
    fn busy_is_409_with_retry_after_and_a_generic_body() {
        let holder = "billing@web-3 (pid 4242, request req-9)";
        let r = Rejection::from_lock_error(
            wait_timeout(Some(Duration::from_millis(1200))),
            false,
            "item_<id>",
            Some(Duration::from_secs(2)),
            None,
        );
        assert_eq!(r.kind(), RejectionKind::Busy);
        assert_eq!(r.retry_after(), Some(Duration::from_secs(2)));
        let (status, headers) = headers(&r);
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(headers[RETRY_AFTER], "2");
        assert_eq!(r.default_response().body(), "lock `item_<id>` is busy\n");
        assert!(!r.to_string().contains(holder));
        assert!(r.lock_error().is_some_and(LockError::is_wait_timeout));
        let grpc = Rejection::from_lock_error(wait_timeout(None), true, "f", None, None)
            .default_response();
        assert_eq!(grpc.headers()["grpc-status"], "10");
        assert_eq!(grpc.headers()["grpc-message"], "lock `f` is busy");
        assert!(!grpc.headers().contains_key(RETRY_AFTER));
    }

    fn clone_timeout(error: &LockError) -> LockError {
        match error {
            LockError::Timeout { name, after } => LockError::Timeout {
                name: name.clone(),
                after: *after,
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn other_lock_errors_have_no_retry_after() {
        let lost = LockError::Lost {
            name: "item_7".into(),
            reason: "the key was gone",
        };
        let r = Rejection::from_lock_error(
            lost,
            false,
            "item_<id>",
            Some(Duration::from_secs(1)),
            None,
        );
        assert_eq!(r.kind(), RejectionKind::Lost);
        assert_eq!(r.retry_after(), None);
        let (status, headers) = headers(&r);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!headers.contains_key(RETRY_AFTER));
        let timeout = LockError::Timeout {
            name: "item_7".into(),
            after: Duration::from_secs(2),
        };
        let r = Rejection::from_lock_error(timeout, true, "item_<id>", None, None);
        assert_eq!(r.kind(), RejectionKind::Unavailable);
        // 503 carries lock-core's hint for an outage, the same as `LockError`'s answer.
        let http = Rejection::from_lock_error(
            r.lock_error().map(clone_timeout).unwrap(),
            false,
            "f",
            None,
            None,
        );
        let answer = http.default_response();
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers()[RETRY_AFTER], "5");
        assert_eq!(http.retry_after(), r.lock_error().unwrap().retry_after());
        assert_eq!(r.default_response().headers()["grpc-status"], "14");
        assert_eq!(
            r.default_response().headers()["grpc-message"],
            "the lock service is unavailable"
        );
    }

    #[test]
    fn grpc_rejections_are_trailers_only() {
        let r = Rejection::from_key_error(KeyError::missing("header.x-order"), true);
        let response = r.default_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "3");
        assert_eq!(
            response.headers()["grpc-message"],
            "key parameter `header.x-order` is missing"
        );
        assert!(response.body().is_empty());
    }

    #[test]
    fn a_full_semaphore_answers_429_or_its_status_and_resource_exhausted() {
        let after = Some(Duration::from_secs(2));
        let r = Rejection::from_lock_error(
            wait_timeout(None),
            false,
            "exports_<header.x-tenant>",
            after,
            Some(StatusCode::TOO_MANY_REQUESTS),
        );
        assert_eq!(r.kind(), RejectionKind::Full);
        let response = r.default_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        assert_eq!(
            response.body(),
            "limit `exports_<header.x-tenant>` is reached\n"
        );
        let unavailable = Some(StatusCode::SERVICE_UNAVAILABLE);
        let r = Rejection::from_lock_error(wait_timeout(None), false, "f", after, unavailable);
        assert_eq!(
            r.default_response().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let r = Rejection::from_lock_error(wait_timeout(None), true, "f", after, unavailable);
        assert_eq!(r.default_response().headers()["grpc-status"], "8");
    }
}
