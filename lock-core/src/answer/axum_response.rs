//! What a [`LockError`] answers over HTTP, for handlers that return it (feature `axum`):
//! the statuses and `Retry-After` of lock-tower's layer, and a body that names the lock's
//! situation, never its holder (service, host, pid, request id) or a Redis address — those
//! stay in the error value and belong in logs.
//!
//! The statuses, messages and `Retry-After` are [`Answer`](crate::Answer)'s, the one
//! mapping.

use crate::LockError;

/// A handler can return `Result<T, LockError>`: the layer's statuses and `Retry-After`.
///
/// Available with the crate feature `axum`.
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl axum_core::response::IntoResponse for LockError {
    /// `409` when busy, `503` when Redis is unavailable or the lock was lost, `400` for an
    /// invalid name, else `500` ([`Answer`](crate::Answer)): plain text that never names the holder, with
    /// [`LockError::retry_after`] as `Retry-After`. Its [class](LockError::class) is logged at
    /// `debug` (not its text, which names the lock and a busy lock's holder: the error is
    /// the caller's to log).
    fn into_response(self) -> axum_core::response::Response {
        use http::header::{HeaderValue, RETRY_AFTER};
        use http::StatusCode;
        let answer = self.answer();
        tracing::debug!(
            distlock.error.class = self.class(),
            "lock error answered over HTTP"
        );
        let status =
            StatusCode::from_u16(answer.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, answer.message()).into_response();
        if let Some(after) = self.retry_after() {
            let headers = response.headers_mut();
            headers.insert(RETRY_AFTER, HeaderValue::from(after.as_secs()));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum_core::response::IntoResponse;

    use super::*;

    #[test]
    fn busy_is_409() {
        let busy = LockError::WaitTimeout {
            name: "item_7".into(),
            waited: Duration::ZERO,
            remaining_ttl: None,
            holder: None,
        };
        let response = busy.into_response();
        assert_eq!(response.status(), http::StatusCode::CONFLICT);
        assert_eq!(response.headers()[http::header::RETRY_AFTER], "1");
    }
}
