//! [`StartError`]: why a server did not start.

use std::{fmt, io};

/// How to get the binary; part of [`StartError::CannotRun`]'s message.
pub const INSTALL_HINT: &str = "install redis-server, e.g. `sudo apt-get install \
     redis-server` (Debian/Ubuntu), `sudo dnf install redis` (Fedora) or `brew install redis` \
     (macOS), or point $REDIS_SERVER_BIN at the binary";

/// Why [`RedisServerBuilder::try_start`](crate::RedisServerBuilder::try_start) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The binary could not be run (see [`is_not_installed`](Self::is_not_installed)).
    CannotRun {
        /// The binary tried.
        bin: String,
        /// Why it could not be run.
        source: io::Error,
    },
    /// It ran but did not come up: it exited, stayed silent, or its port was taken on
    /// every attempt. The message includes the server's log.
    Failed(String),
}

impl StartError {
    /// True when the binary does not exist: redis-server is not installed (or
    /// `$REDIS_SERVER_BIN` points nowhere).
    pub fn is_not_installed(&self) -> bool {
        matches!(self, Self::CannotRun { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CannotRun { bin, source } => {
                write!(f, "cannot run `{bin}`: {source}; {INSTALL_HINT}")
            }
            Self::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::CannotRun { source, .. } => Some(source),
            Self::Failed(_) => None,
        }
    }
}
