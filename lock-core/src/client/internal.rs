//! Not public API: what the workspace's own tests, benchmarks and tools read of a client's
//! insides, behind the feature `__internal` (off by default, hidden from the docs, no semver
//! promise). A test that waits for "the waiter has subscribed" or "the watchdog renews
//! three locks" reads it here instead of sleeping; nothing a service should depend on.

use crate::client::handle::LockClient;

impl LockClient {
    /// Number of locks the watchdog currently renews.
    #[doc(hidden)]
    pub fn renewing(&self) -> usize {
        self.holds.renewed().len()
    }

    /// Number of release channels with a waiter of this client subscribed.
    #[doc(hidden)]
    pub fn waited_channels(&self) -> usize {
        self.engine.waiters.channel_count()
    }
}
