//! The one error type of the crate.

use std::future::Future;
use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::protocol::holder::HolderInfo;
use crate::protocol::library::LIBRARY_NAME;
use crate::protocol::name::LockName;

/// Everything that can go wrong while taking, keeping or releasing a lock.
///
/// Each variant that concerns one lock names it in its message. A busy lock
/// ([`WaitTimeout`](Self::WaitTimeout)) and an unreachable Redis
/// ([`Unavailable`](Self::Unavailable), [`Timeout`](Self::Timeout)) are always different
/// variants, so callers can answer "try later" and "we are down" differently.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock stayed held by another owner for the whole wait.
    #[error("lock `{name}` is held by {}: gave up after waiting {waited:?}{}",
        .holder.as_deref().map_or_else(|| "another owner".to_owned(), ToString::to_string),
        .remaining_ttl.map(|t| format!(" (the holder's lease has {t:?} left)")).unwrap_or_default())]
    WaitTimeout {
        /// The lock.
        name: LockName,
        /// How long this call waited.
        waited: Duration,
        /// The holder's remaining lease as Redis last reported it, if it has one.
        remaining_ttl: Option<Duration>,
        /// Who held the lock as Redis last reported it, when the holder recorded it.
        holder: Option<Box<HolderInfo>>,
    },
    /// Redis could not be reached or answered with an error.
    #[error("lock `{name}`: redis is unavailable: {source}")]
    Unavailable {
        /// The lock.
        name: LockName,
        /// The error from the Redis client.
        #[source]
        source: redis::RedisError,
    },
    /// Redis answered with a refusal that retrying cannot change: the key is not a lock
    /// (`WRONGTYPE`: the name collides with another key), or the user lacks the permission
    /// or the password (`NOPERM`, `NOAUTH`, `WRONGPASS`). A configuration problem, not an
    /// outage: [`is_unavailable`](Self::is_unavailable) is false for it.
    #[error("lock `{name}`: redis refused the command: {source}")]
    Refused {
        /// The lock.
        name: LockName,
        /// The error from the Redis client.
        #[source]
        source: redis::RedisError,
    },
    /// Redis did not answer within the command timeout.
    #[error("lock `{name}`: redis did not answer within {after:?}")]
    Timeout {
        /// The lock.
        name: LockName,
        /// The command timeout that elapsed.
        after: Duration,
    },
    /// Fewer replicas than required acknowledged the acquisition in time; the lock was
    /// released again (see [`LockClientBuilder::replica_ack`](crate::LockClientBuilder::replica_ack):
    /// by default, where the master has a replica online, one must acknowledge within 1 s).
    #[error("lock `{name}`: only {acked} of {required} replicas acknowledged the acquisition")]
    NotReplicated {
        /// The lock.
        name: LockName,
        /// Replicas that acknowledged.
        acked: usize,
        /// Replicas required.
        required: usize,
    },
    /// The lock can no longer be assumed held: a renewal found another owner or no key, or
    /// the last confirmed lease ran out without a renewal.
    #[error("lock `{name}` was lost: {reason}")]
    Lost {
        /// The lock.
        name: LockName,
        /// What showed the loss.
        reason: &'static str,
    },
    /// At release, Redis no longer had this owner's hold: the lease expired, or an operator
    /// or another owner removed it. Nothing was deleted.
    #[error("lock `{name}` was not held at release (its lease expired or it was taken over)")]
    NotHeld {
        /// The lock.
        name: LockName,
    },
    /// The name is empty or longer than the configured limit.
    #[error("invalid lock name `{name}`: {reason}")]
    InvalidName {
        /// The offending name.
        name: LockName,
        /// Why it was rejected.
        reason: String,
    },
    /// A setting of one request is out of range (a lease below the minimum, say).
    #[error("lock `{name}`: invalid request: {reason}")]
    InvalidRequest {
        /// The lock.
        name: LockName,
        /// What is wrong, naming the setting.
        reason: String,
    },
    /// A client setting is out of range (a zero lease, a bad URL, …).
    #[error("invalid lock configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, naming the setting.
        reason: String,
    },
    /// The client was shut down ([`LockClient::shutdown`](crate::LockClient::shutdown)): it
    /// takes no more locks.
    #[error("lock `{name}`: the lock client was shut down")]
    ShutDown {
        /// The lock.
        name: LockName,
    },
    /// The Redis server has no Redis Functions: distlock's protocol is a functions library,
    /// which needs Redis 7.0 or later, or Valkey 7.2 or later.
    #[error("lock `{name}`: the Redis server is version {version}, but distlock needs Redis 7.0+ or Valkey 7.2+ (its protocol is a Redis Functions library)")]
    ServerTooOld {
        /// The lock.
        name: LockName,
        /// The server's `redis_version`, as `INFO server` tells it.
        version: String,
    },
    /// distlock's functions library is not loaded on the server, and this client's user may
    /// not load it (`NOPERM` on `FUNCTION LOAD`): an operator loads it ahead of time with
    /// `distlock functions load` (or [`LockClient::load_functions`](crate::LockClient::load_functions)).
    #[error("lock `{name}`: distlock's functions library `{library}` is not loaded on this Redis, and this user may not load it ({source}): have an operator run `distlock functions load`, or allow the user `FUNCTION LOAD`")]
    LibraryNotLoaded {
        /// The lock.
        name: LockName,
        /// The library's name, which carries its version.
        library: &'static str,
        /// Redis' refusal of `FUNCTION LOAD`.
        #[source]
        source: redis::RedisError,
    },
    /// No process-wide default client was installed (see
    /// [`set_default_client`](crate::set_default_client)).
    #[error("no default lock client is installed: call lock_core::set_default_client at start-up or pass `client = …`")]
    NoDefaultClient,
}

impl LockError {
    /// The lock this error is about, when there is one.
    pub fn name(&self) -> Option<&LockName> {
        match self {
            Self::WaitTimeout { name, .. }
            | Self::Unavailable { name, .. }
            | Self::Refused { name, .. }
            | Self::Timeout { name, .. }
            | Self::NotReplicated { name, .. }
            | Self::Lost { name, .. }
            | Self::NotHeld { name }
            | Self::InvalidName { name, .. }
            | Self::InvalidRequest { name, .. }
            | Self::ServerTooOld { name, .. }
            | Self::LibraryNotLoaded { name, .. }
            | Self::ShutDown { name } => Some(name),
            Self::InvalidConfig { .. } | Self::NoDefaultClient => None,
        }
    }

    /// The error's class: its variant as a stable `snake_case` word (`wait_timeout`,
    /// `unavailable`, `timeout`, `lost`, …). Unlike the error's text, it never names the
    /// lock: what the library's own log events carry unless the client opted in to lock
    /// names ([`LockClientBuilder::trace_lock_names`](crate::LockClientBuilder::trace_lock_names)),
    /// and a low-cardinality value for a user's logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            Self::WaitTimeout { .. } => "wait_timeout",
            Self::Unavailable { .. } => "unavailable",
            Self::Refused { .. } => "refused",
            Self::Timeout { .. } => "timeout",
            Self::NotReplicated { .. } => "not_replicated",
            Self::Lost { .. } => "lost",
            Self::NotHeld { .. } => "not_held",
            Self::InvalidName { .. } => "invalid_name",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::ShutDown { .. } => "shut_down",
            Self::ServerTooOld { .. } => "server_too_old",
            Self::LibraryNotLoaded { .. } => "library_not_loaded",
            Self::NoDefaultClient => "no_default_client",
        }
    }

    /// True when the lock was busy for the whole wait.
    pub fn is_wait_timeout(&self) -> bool {
        matches!(self, Self::WaitTimeout { .. })
    }

    /// True when Redis could not be reached, did not answer in time, or could not replicate
    /// the acquisition: an outage, worth retrying later (not a [refusal](Self::Refused)).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable { .. } | Self::Timeout { .. } | Self::NotReplicated { .. }
        )
    }

    /// True when the connection the call went through was lost or could not be made (it
    /// reconnects on the next call, maybe to another server).
    pub(crate) fn is_connection_lost(&self) -> bool {
        match self {
            Self::Unavailable { source, .. } => {
                source.is_io_error()
                    || source.is_connection_dropped()
                    || source.is_connection_refusal()
            }
            _ => false,
        }
    }

    /// True when Redis refused the command for good: see [`Refused`](Self::Refused),
    /// [`ServerTooOld`](Self::ServerTooOld) and [`LibraryNotLoaded`](Self::LibraryNotLoaded).
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Self::Refused { .. } | Self::ServerTooOld { .. } | Self::LibraryNotLoaded { .. }
        )
    }

    /// True when the client was shut down ([`ShutDown`](Self::ShutDown)).
    pub fn is_shut_down(&self) -> bool {
        matches!(self, Self::ShutDown { .. })
    }

    /// True when a held lock was lost.
    pub fn is_lost(&self) -> bool {
        matches!(self, Self::Lost { .. })
    }

    /// The holder's remaining lease reported with a wait timeout (for `Retry-After`).
    pub fn remaining_ttl(&self) -> Option<Duration> {
        match self {
            Self::WaitTimeout { remaining_ttl, .. } => *remaining_ttl,
            _ => None,
        }
    }

    /// Who held the lock, reported with a wait timeout when the holder recorded it.
    pub fn holder(&self) -> Option<&HolderInfo> {
        match self {
            Self::WaitTimeout { holder, .. } => holder.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn invalid_config(reason: impl Into<String>) -> Self {
        Self::InvalidConfig {
            reason: reason.into(),
        }
    }

    /// The error for a failed Redis call about `name` bounded by `timeout`.
    fn from_failure(name: &LockName, failure: Failure, timeout: Duration) -> Self {
        let name = name.clone();
        let source = match failure {
            Failure::Redis(source) => source,
            Failure::TooOld { version } => return Self::ServerTooOld { name, version },
            Failure::NotLoadable(source) => {
                return Self::LibraryNotLoaded {
                    name,
                    library: LIBRARY_NAME,
                    source,
                }
            }
        };
        if source.is_timeout() {
            Self::Timeout {
                name,
                after: timeout,
            }
        } else if is_refusal(&source) {
            Self::Refused { name, source }
        } else {
            Self::Unavailable { name, source }
        }
    }
}

/// True for an answer that retrying cannot change. Everything else — I/O, `LOADING`,
/// `TRYAGAIN`, `CLUSTERDOWN`, `READONLY`, `OOM`, `BUSY`, too many clients — is an outage.
fn is_refusal(error: &RedisError) -> bool {
    error.kind() == ErrorKind::AuthenticationFailed
        || matches!(
            error.code(),
            Some("WRONGTYPE" | "NOPERM" | "NOAUTH" | "WRONGPASS")
        )
        || is_acl_failure_in_function(error)
}

/// A command, key or channel the user may not use, met inside a library function: Redis
/// and Valkey answer it as `ERR` (Redis 7.0: "The user executing the script can't …",
/// Valkey: "ACL failure in script: …"), not `NOPERM`.
fn is_acl_failure_in_function(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error.detail().is_some_and(|d| {
            d.starts_with("The user executing the script can't")
                || d.starts_with("ACL failure in script")
        })
}

/// Why one Redis call failed: the Redis client's error, or what loading the functions
/// library found (see [`crate::protocol::fcall`]).
#[derive(Debug)]
pub(crate) enum Failure {
    Redis(RedisError),
    /// The server has no `FCALL`: its `redis_version`.
    TooOld {
        version: String,
    },
    /// `FUNCTION LOAD` was refused for lack of permission.
    NotLoadable(RedisError),
}

impl From<RedisError> for Failure {
    fn from(error: RedisError) -> Self {
        Self::Redis(error)
    }
}

/// Runs one Redis call about `name` within `timeout`, naming the lock in its error.
pub(crate) async fn bounded<T, E: Into<Failure>>(
    name: &LockName,
    timeout: Duration,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(failure)) => Err(LockError::from_failure(name, failure.into(), timeout)),
        Err(_) => Err(LockError::Timeout {
            name: name.clone(),
            after: timeout,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_lock() {
        let err = LockError::WaitTimeout {
            name: LockName::from("item_7"),
            waited: Duration::from_secs(2),
            remaining_ttl: Some(Duration::from_millis(1500)),
            holder: None,
        };
        let text = err.to_string();
        assert!(text.contains("`item_7`") && text.contains("1.5s"), "{text}");
        assert!(text.contains("held by another owner"), "{text}");
        assert!(err.is_wait_timeout() && !err.is_unavailable());
    }

    #[test]
    fn wait_timeout_names_the_holder() {
        let fields = ["u:1", "billing", "web-3", "42", "1714533129456", "r-9"].map(String::from);
        let err = LockError::WaitTimeout {
            name: LockName::from("item_7"),
            waited: Duration::from_secs(2),
            remaining_ttl: None,
            holder: HolderInfo::from_fields(&fields).map(Box::new),
        };
        assert_eq!(
            err.to_string(),
            "lock `item_7` is held by billing@web-3 (pid 42, request r-9) since \
             2024-05-01T03:12:09.456Z: gave up after waiting 2s"
        );
        assert_eq!(err.holder().map(HolderInfo::service), Some("billing"));
    }

    #[test]
    fn an_acl_failure_inside_a_function_is_a_refusal() {
        let error = |text: &str| match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(error)) => RedisError::from(error),
            other => panic!("not an error: {other:?}"),
        };
        for text in [
            "ERR The user executing the script can't run this command or subcommand script: \
             distlock_4_acquire, on @user_function:198.",
            "ERR ACL failure in script: User app has no permissions to run the 'time' command \
             script: on @user_function:198.",
            "NOPERM User app has no permissions to run the 'fcall' command",
        ] {
            assert!(is_refusal(&error(text)), "{text}");
        }
        assert!(!is_refusal(&error("ERR Function not found")));
    }

    #[test]
    fn the_class_never_names_the_lock() {
        let err = LockError::Lost {
            name: LockName::from("item_7"),
            reason: "its lease ran out",
        };
        assert_eq!(err.class(), "lost");
        // The control: the text does name it.
        assert!(err.to_string().contains("item_7") && !err.class().contains("item_7"));
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<LockError>();
    }
}
