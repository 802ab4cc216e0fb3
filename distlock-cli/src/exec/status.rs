//! `distlock exec`'s exit statuses: the command's own, or one of distlock's, in the ranges
//! that `timeout(1)` and the shells use, so scripts can tell them apart.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

/// The default of `--busy-exit-code`: sysexits' `EX_TEMPFAIL` ("try again later"), not
/// flock's 1, which commands return for their own failures.
pub(crate) const BUSY: u8 = 75;
/// The lock was lost while the command ran, and the command was stopped (as `timeout(1)`
/// exits 124 when it stopped its command).
pub(crate) const LOST: u8 = 124;
/// `distlock exec` itself failed before running the command (as `timeout(1)`'s 125).
pub(crate) const FAILED: u8 = 125;
/// The command was found but could not be run (as shells).
pub(crate) const CANNOT_RUN: u8 = 126;
/// The command was not found (as shells).
pub(crate) const NOT_FOUND: u8 = 127;

/// The table of `distlock exec --help`.
pub(crate) const HELP: &str = "\
Exit status:
  0-255   COMMAND's exit status; 128+N when signal N ended COMMAND, as shells report it
  75      the lock stayed busy (--skip-if-busy, or --wait ran out): COMMAND did not run;
          --busy-exit-code changes it (to tell a skip from COMMAND's own 75)
  124     the lock was lost while COMMAND ran: COMMAND was stopped (SIGTERM, SIGKILL)
  125     distlock exec failed (Redis unreachable, invalid name, too few replicas
          acknowledged the lock within --replica-timeout): COMMAND did not run
  126     COMMAND was found but could not be run
  127     COMMAND was not found
  2       invalid options (usage error): COMMAND did not run
  128+N   signal N arrived while distlock exec waited for the lock: COMMAND did not run";

/// The status a shell reports for a command that ended with `status`: its exit code, or
/// 128 + the number of the signal that killed it.
pub(crate) fn of(status: ExitStatus) -> u8 {
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal));
    // On Unix an exit code is 0..=255 and a signal number below 128: out of range only
    // for a status that is neither, which `wait` never reports.
    code.and_then(|code| u8::try_from(code).ok())
        .unwrap_or(FAILED)
}

/// The status of a process ended by `signal`, as a shell reports it.
pub(crate) fn killed_by(signal: Signal) -> u8 {
    128 + signal as u8
}

/// The status for a command that could not be started because of `error`.
pub(crate) fn not_started(error: &io::Error) -> u8 {
    match error.kind() {
        io::ErrorKind::NotFound => NOT_FOUND,
        _ => CANNOT_RUN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_reported_as_shells_do() {
        // A raw wait status: exit code in the second byte, a killing signal in the first.
        assert_eq!(of(ExitStatus::from_raw(0)), 0);
        assert_eq!(of(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(of(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(of(ExitStatus::from_raw(Signal::SIGKILL as i32)), 137);
        assert_eq!(of(ExitStatus::from_raw(Signal::SIGTERM as i32)), 143);
        assert_eq!(killed_by(Signal::SIGINT), 130);
    }

    #[test]
    fn a_command_that_cannot_start_is_126_or_127() {
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(not_started(&missing), 127);
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(not_started(&denied), 126);
    }

    /// The help's table names every status this module defines.
    #[test]
    fn the_help_lists_every_status() {
        for code in [BUSY, LOST, FAILED, CANNOT_RUN, NOT_FOUND] {
            assert!(HELP.contains(&format!("\n  {code} ")), "{code} missing");
        }
    }
}
