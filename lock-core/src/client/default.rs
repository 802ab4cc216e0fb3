//! The process-wide default client, for `#[distributed_lock]` without `client = …`.

use std::sync::OnceLock;

use crate::client::handle::LockClient;
use crate::error::LockError;

static DEFAULT: OnceLock<LockClient> = OnceLock::new();

/// Installs the process-wide default client, once, at start-up.
///
/// # Errors
/// Gives the client back if a default was already installed.
pub fn set_default_client(client: LockClient) -> Result<(), LockClient> {
    DEFAULT.set(client)
}

/// The process-wide default client.
///
/// # Errors
/// [`LockError::NoDefaultClient`] when none was installed.
pub fn default_client() -> Result<LockClient, LockError> {
    DEFAULT.get().cloned().ok_or(LockError::NoDefaultClient)
}
