//! The settings an [`IdempotencyLayer`](crate::idempotency::IdempotencyLayer) shares with its services,
//! and what they decide for one request.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderName, Method, StatusCode};
use lock_core::idempotency::Fingerprint;
use lock_core::{LockClient, LockName};

use crate::idempotency::answer::{code, Answer};
use crate::idempotency::key::{lock_name, read_key, KeyProblem};
use crate::retry::HoldTimes;

/// The caller of a request, for scoping its keys.
pub(crate) type CallerFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;
/// What identifies a request for its key: its head and body.
pub(crate) type FingerprintFn = Arc<dyn Fn(&Parts, &Bytes) -> Fingerprint + Send + Sync>;

pub(crate) struct Config {
    pub(crate) client: LockClient,
    pub(crate) methods: Vec<Method>,
    pub(crate) header: HeaderName,
    pub(crate) required: bool,
    pub(crate) namespace: String,
    pub(crate) caller: Option<CallerFn>,
    pub(crate) fingerprint: FingerprintFn,
    pub(crate) max_key_len: usize,
    pub(crate) max_request: usize,
    pub(crate) max_response: usize,
    pub(crate) retention: Duration,
    pub(crate) lease: Option<Duration>,
    pub(crate) keep_headers: Vec<HeaderName>,
    pub(crate) too_large: StatusCode,
    pub(crate) holds: HoldTimes,
}

/// What the layer does with one request.
pub(crate) enum Plan {
    /// Another method, or no key where none is required.
    Skip,
    /// Run it under this key.
    Key(LockName),
    /// The key is missing or invalid.
    Refuse(Answer),
}

impl Config {
    pub(crate) fn plan(&self, parts: &Parts) -> Plan {
        if !self.methods.contains(&parts.method) {
            return Plan::Skip;
        }
        let key = match read_key(parts, &self.header, self.max_key_len) {
            Ok(Some(key)) => key,
            Ok(None) if !self.required => return Plan::Skip,
            Ok(None) => return self.refuse(KeyProblem::Missing),
            Err(problem) => return self.refuse(problem),
        };
        let caller = match &self.caller {
            None => None,
            Some(f) => match f(parts) {
                Some(caller) => Some(caller),
                None => return self.refuse(KeyProblem::NoCaller),
            },
        };
        Plan::Key(lock_name(&self.namespace, caller.as_deref(), key))
    }

    fn refuse(&self, problem: KeyProblem) -> Plan {
        let message = problem.message(&self.header);
        Plan::Refuse(Answer::new(
            StatusCode::BAD_REQUEST,
            code::INVALID_ARGUMENT,
            message,
        ))
    }

    /// The headers of a response that are stored with it: the kept ones, and for gRPC
    /// `content-type` and the status it carries in a trailers-only answer.
    pub(crate) fn kept_headers(&self, headers: &HeaderMap, grpc: bool) -> HeaderMap {
        let mut kept = HeaderMap::new();
        for name in &self.keep_headers {
            for value in headers.get_all(name) {
                kept.append(name.clone(), value.clone());
            }
        }
        if grpc {
            for name in GRPC_HEADERS {
                if let Some(value) = headers.get(&name) {
                    kept.insert(name, value.clone());
                }
            }
        }
        kept
    }
}

/// What a gRPC response carries that a replay must carry too.
const GRPC_HEADERS: [HeaderName; 4] = [
    http::header::CONTENT_TYPE,
    HeaderName::from_static("grpc-status"),
    HeaderName::from_static("grpc-message"),
    HeaderName::from_static("grpc-status-details-bin"),
];

/// True for an HTTP status that is the request's outcome: not a server error, nor one
/// that says "try again" (408, 409, 425, 429).
pub(crate) fn is_final_http(status: StatusCode) -> bool {
    !status.is_server_error() && ![408, 409, 425, 429].contains(&status.as_u16())
}

/// True for a gRPC status that is the call's outcome: OK and the client's errors
/// (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION,
/// OUT_OF_RANGE, UNIMPLEMENTED, UNAUTHENTICATED), not the transient ones.
pub(crate) fn is_final_grpc(code: &[u8]) -> bool {
    matches!(
        code,
        b"0" | b"3" | b"5" | b"6" | b"7" | b"9" | b"11" | b"12" | b"16"
    )
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("methods", &self.methods)
            .field("header", &self.header)
            .field("required", &self.required)
            .field("namespace", &self.namespace)
            .field("caller", &self.caller.is_some())
            .field("max_key_len", &self.max_key_len)
            .field("max_request", &self.max_request)
            .field("max_response", &self.max_response)
            .field("retention", &self.retention)
            .field("lease", &self.lease)
            .field("keep_headers", &self.keep_headers)
            .field("too_large", &self.too_large)
            .finish_non_exhaustive()
    }
}
