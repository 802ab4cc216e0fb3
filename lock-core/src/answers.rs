//! What a [`LockError`] answers over HTTP and gRPC, for handlers that return it (features
//! `axum` and `tonic`): the codes of lock-tower's layer, and a body that names the lock's
//! situation, never its holder (service, host, pid, request id) or a Redis address — those
//! stay in the error value and belong in logs.
//!
//! | error | HTTP | gRPC |
//! | --- | --- | --- |
//! | busy for the whole wait ([`LockError::is_wait_timeout`]) | `409 Conflict` | `ABORTED` |
//! | Redis unavailable ([`LockError::is_unavailable`]) | `503 Service Unavailable` | `UNAVAILABLE` |
//! | lost while held ([`LockError::is_lost`]) | `503 Service Unavailable` | `ABORTED` |
//! | invalid name | `400 Bad Request` | `INVALID_ARGUMENT` |
//! | anything else (configuration) | `500 Internal Server Error` | `INTERNAL` |

use crate::LockError;

/// The classes of the table above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Busy,
    Unavailable,
    Lost,
    InvalidName,
    Internal,
}

impl Answer {
    fn of(error: &LockError) -> Self {
        match error {
            e if e.is_wait_timeout() => Self::Busy,
            e if e.is_unavailable() => Self::Unavailable,
            e if e.is_lost() => Self::Lost,
            LockError::InvalidName { .. } => Self::InvalidName,
            _ => Self::Internal,
        }
    }

    /// A message for the client: what happened, not who holds what.
    fn message(self) -> &'static str {
        match self {
            Self::Busy => "the resource is locked; retry later",
            Self::Unavailable => "the lock service is unavailable",
            Self::Lost => "the lock was lost while the request ran",
            Self::InvalidName => "the lock name is invalid",
            Self::Internal => "internal error",
        }
    }
}

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl axum_core::response::IntoResponse for LockError {
    /// `409` when busy, `503` when Redis is unavailable or the lock was lost, `400` for an
    /// invalid name, else `500`: plain text that never names the holder. The error itself
    /// is logged at `debug` (a busy lock names its holder there).
    fn into_response(self) -> axum_core::response::Response {
        use http::StatusCode;
        let answer = Answer::of(&self);
        tracing::debug!(error = %self, "lock error answered over HTTP");
        let status = match answer {
            Answer::Busy => StatusCode::CONFLICT,
            Answer::Unavailable | Answer::Lost => StatusCode::SERVICE_UNAVAILABLE,
            Answer::InvalidName => StatusCode::BAD_REQUEST,
            Answer::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, answer.message()).into_response()
    }
}

#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
impl From<LockError> for tonic::Status {
    /// `ABORTED` when busy or lost, `UNAVAILABLE` when Redis is unavailable,
    /// `INVALID_ARGUMENT` for an invalid name, else `INTERNAL`, with a message that never
    /// names the holder. The error itself is logged at `debug`.
    fn from(error: LockError) -> Self {
        use tonic::Code;
        let answer = Answer::of(&error);
        tracing::debug!(%error, "lock error answered over gRPC");
        let code = match answer {
            Answer::Busy | Answer::Lost => Code::Aborted,
            Answer::Unavailable => Code::Unavailable,
            Answer::InvalidName => Code::InvalidArgument,
            Answer::Internal => Code::Internal,
        };
        tonic::Status::new(code, answer.message())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn busy() -> LockError {
        LockError::WaitTimeout {
            name: "item_7".into(),
            waited: Duration::ZERO,
            remaining_ttl: None,
            holder: None,
        }
    }

    #[test]
    fn classes_follow_the_predicates() {
        assert_eq!(Answer::of(&busy()), Answer::Busy);
        let lost = LockError::Lost {
            name: "item_7".into(),
            reason: "gone",
        };
        assert_eq!(Answer::of(&lost), Answer::Lost);
        assert_eq!(Answer::of(&LockError::NoDefaultClient), Answer::Internal);
    }

    #[cfg(feature = "tonic")]
    #[test]
    fn busy_is_aborted_without_the_holder() {
        let status = tonic::Status::from(busy());
        assert_eq!(status.code(), tonic::Code::Aborted);
        assert_eq!(status.message(), "the resource is locked; retry later");
    }

    #[cfg(feature = "axum")]
    #[test]
    fn busy_is_409() {
        use axum_core::response::IntoResponse;
        let response = busy().into_response();
        assert_eq!(response.status(), http::StatusCode::CONFLICT);
    }
}
