//! What a [`LockError`] answers over gRPC, for methods that use `?` on it (feature `tonic`):
//! the codes of lock-tower's layer, and a message that names the lock's situation, never
//! its holder (service, host, pid, request id) or a Redis address — those stay in the
//! error value and belong in logs.
//!
//! The codes and messages are [`Answer`](crate::Answer)'s, the one mapping.

use crate::LockError;

/// A gRPC method can use `?` on a `LockError`: the layer's codes.
///
/// Available with the crate feature `tonic`.
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
impl From<LockError> for tonic::Status {
    /// `ABORTED` when busy or lost, `UNAVAILABLE` when Redis is unavailable,
    /// `INVALID_ARGUMENT` for an invalid name, else `INTERNAL`, with a message that never
    /// names the holder. Its [class](LockError::class) is logged at `debug` (not its text,
    /// which names the lock: the error is the caller's to log).
    fn from(error: LockError) -> Self {
        let answer = error.answer();
        tracing::debug!(
            distlock.error.class = error.class(),
            "lock error answered over gRPC"
        );
        tonic::Status::new(tonic::Code::from_i32(answer.grpc_code()), answer.message())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn busy_is_aborted_without_the_holder() {
        let busy = LockError::WaitTimeout {
            name: "item_7".into(),
            waited: Duration::ZERO,
            remaining_ttl: None,
            holder: None,
        };
        let status = tonic::Status::from(busy);
        assert_eq!(status.code(), tonic::Code::Aborted);
        assert_eq!(status.message(), "the resource is locked; retry later");
    }
}
