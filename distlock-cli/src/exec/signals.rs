//! The signals `distlock exec` passes on to its command instead of dying of them.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught from the moment this is made: `distlock exec`
/// hands them to the command and ends when the command does, so that the lock is released
/// after the command, never before it. (A terminal's hang-up and Ctrl-\ would otherwise
/// kill `distlock exec` alone, leaving the command running without the lock.)
#[derive(Debug)]
pub(crate) struct Forwarded {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Forwarded {
    /// Starts catching the signals.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub(crate) fn catch() -> io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The next signal received.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal not yet returned is returned by a later call.
    pub(crate) async fn recv(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.int.recv() => Signal::SIGINT,
            Some(()) = self.term.recv() => Signal::SIGTERM,
            Some(()) = self.hup.recv() => Signal::SIGHUP,
            Some(()) = self.quit.recv() => Signal::SIGQUIT,
            // The streams end only with the runtime.
            else => std::future::pending().await,
        }
    }
}
