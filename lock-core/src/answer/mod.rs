//! How a [`LockError`] is answered at the edge of a service: the one mapping from errors to
//! HTTP statuses, gRPC codes, messages and `Retry-After` that lock-core's `axum` and `tonic`
//! answers (`axum_response.rs`, `tonic_status.rs`) and lock-tower's layer share.

use std::time::Duration;

use crate::LockError;

#[cfg(feature = "axum")]
mod axum_response;
#[cfg(feature = "tonic")]
mod tonic_status;

/// The class of a [`LockError`] as a client of the service sees it ([`LockError::answer`]).
///
/// | class | HTTP | gRPC | `Retry-After` |
/// | --- | --- | --- | --- |
/// | [`Busy`](Self::Busy): busy for the whole wait | `409 Conflict` | `ABORTED` | the wait, at most the holder's lease |
/// | [`Unavailable`](Self::Unavailable): Redis unreachable | `503 Service Unavailable` | `UNAVAILABLE` | [`UNAVAILABLE_RETRY_AFTER`](Self::UNAVAILABLE_RETRY_AFTER) |
/// | [`Lost`](Self::Lost): lost while held | `503 Service Unavailable` | `ABORTED` | none |
/// | [`InvalidName`](Self::InvalidName) | `400 Bad Request` | `INVALID_ARGUMENT` | none |
/// | [`Internal`](Self::Internal): anything else | `500 Internal Server Error` | `INTERNAL` | none |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// The lock stayed busy for the whole wait ([`LockError::is_wait_timeout`]).
    Busy,
    /// Redis could not be reached or did not answer ([`LockError::is_unavailable`]), or
    /// the client was [shut down](LockError::ShutDown).
    Unavailable,
    /// The lock was lost while held ([`LockError::is_lost`]).
    Lost,
    /// The lock name made from the request is invalid.
    InvalidName,
    /// Anything else: a misconfiguration, such as a missing default client.
    Internal,
}

impl Answer {
    /// The `Retry-After` of an [`Unavailable`](Self::Unavailable) answer: long enough for a
    /// Redis restart or failover, short enough that a recovered service is found soon.
    pub const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(5);

    /// The class of `error`.
    pub fn of(error: &LockError) -> Self {
        match error {
            e if e.is_wait_timeout() => Self::Busy,
            e if e.is_unavailable() => Self::Unavailable,
            e if e.is_lost() => Self::Lost,
            LockError::InvalidName { .. } => Self::InvalidName,
            // The service is stopping: another instance can answer.
            LockError::ShutDown { .. } => Self::Unavailable,
            _ => Self::Internal,
        }
    }

    /// The HTTP status code.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Busy => 409,
            Self::Unavailable | Self::Lost => 503,
            Self::InvalidName => 400,
            Self::Internal => 500,
        }
    }

    /// The gRPC status code (`ABORTED` = 10, `UNAVAILABLE` = 14, `INVALID_ARGUMENT` = 3,
    /// `INTERNAL` = 13).
    pub fn grpc_code(self) -> i32 {
        match self {
            Self::Busy | Self::Lost => 10,
            Self::Unavailable => 14,
            Self::InvalidName => 3,
            Self::Internal => 13,
        }
    }

    /// A lowercase message for the client: what happened, never who holds the lock or a
    /// Redis address.
    pub fn message(self) -> &'static str {
        match self {
            Self::Busy => "the resource is locked; retry later",
            Self::Unavailable => "the lock service is unavailable",
            Self::Lost => "the lock was lost while the request ran",
            Self::InvalidName => "the lock name is invalid",
            Self::Internal => "internal error",
        }
    }
}

impl LockError {
    /// How this error is answered to a client of the service; see [`Answer`].
    pub fn answer(&self) -> Answer {
        Answer::of(self)
    }

    /// When a client should retry, in whole seconds (at least 1): for a busy lock the wait
    /// it gave up after, never beyond the holder's remaining lease (what one more attempt
    /// would wait anyway); for an unreachable Redis [`Answer::UNAVAILABLE_RETRY_AFTER`];
    /// `None` for the other errors. lock-tower's layer answers the same, except that a busy
    /// lock's hint there comes from the hold times it has seen once it has seen some.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::WaitTimeout {
                waited,
                remaining_ttl,
                ..
            } => Some(whole_seconds(
                remaining_ttl.map_or(*waited, |lease| lease.min(*waited)),
            )),
            e if e.answer() == Answer::Unavailable => Some(Answer::UNAVAILABLE_RETRY_AFTER),
            _ => None,
        }
    }
}

/// Rounds up to whole seconds, at least 1 (`Retry-After: 0` would only meet the holder
/// again).
pub(crate) fn whole_seconds(d: Duration) -> Duration {
    let secs = u64::try_from(d.as_millis().div_ceil(1000)).unwrap_or(u64::MAX);
    Duration::from_secs(secs.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(waited: Duration, remaining_ttl: Option<Duration>) -> LockError {
        LockError::WaitTimeout {
            name: "item_7".into(),
            waited,
            remaining_ttl,
            holder: None,
        }
    }

    #[test]
    fn classes_follow_the_predicates() {
        let b = busy(Duration::ZERO, None);
        assert_eq!(b.answer(), Answer::Busy);
        assert_eq!(
            (Answer::Busy.http_status(), Answer::Busy.grpc_code()),
            (409, 10)
        );
        let lost = LockError::Lost {
            name: "item_7".into(),
            reason: "gone",
        };
        assert_eq!(lost.answer(), Answer::Lost);
        assert_eq!(lost.retry_after(), None);
        assert_eq!(LockError::NoDefaultClient.answer(), Answer::Internal);
        let timeout = LockError::Timeout {
            name: "item_7".into(),
            after: Duration::from_secs(2),
        };
        assert_eq!(timeout.answer(), Answer::Unavailable);
        assert_eq!(timeout.retry_after(), Some(Answer::UNAVAILABLE_RETRY_AFTER));
        // A client that shut down: the service is stopping, another instance can answer.
        let shut = LockError::ShutDown {
            name: "item_7".into(),
        };
        assert_eq!(
            (shut.answer(), shut.answer().http_status()),
            (Answer::Unavailable, 503)
        );
        assert_eq!(shut.retry_after(), Some(Answer::UNAVAILABLE_RETRY_AFTER));
    }

    #[test]
    fn busy_retry_after_is_the_wait_within_the_lease_in_whole_seconds() {
        let after = |waited, ttl| busy(waited, ttl).retry_after().unwrap().as_secs();
        assert_eq!(after(Duration::ZERO, None), 1);
        assert_eq!(after(Duration::from_millis(2100), None), 3);
        let ttl = Some(Duration::from_millis(1200));
        assert_eq!(after(Duration::from_secs(5), ttl), 2);
    }
}
