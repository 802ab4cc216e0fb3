//! [`Fingerprint`]: what a request with an idempotency key is, so that the same key with
//! another request is refused.

use std::fmt;

use sha2::{Digest, Sha256};

/// A digest of what a request asked for (SHA-256 of its parts), stored with its record:
/// a later request with the same key and another fingerprint is refused
/// ([`IdempotencyError::Mismatch`](crate::idempotency::IdempotencyError::Mismatch)).
///
/// ```
/// use lock_core::idempotency::Fingerprint;
/// let a = Fingerprint::builder().part(b"POST").part(b"/charges").part(b"{\"cents\":100}").finish();
/// let b = Fingerprint::builder().part(b"POST").part(b"/charges").part(b"{\"cents\":999}").finish();
/// assert_ne!(a, b);
/// // Parts are length-prefixed: moving bytes from one part to the next changes it.
/// assert_ne!(Fingerprint::builder().part(b"ab").part(b"c").finish(),
///            Fingerprint::builder().part(b"a").part(b"bc").finish());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of one part.
    pub fn of(bytes: impl AsRef<[u8]>) -> Self {
        Self::builder().part(bytes).finish()
    }

    /// A fingerprint of several parts, hashed as they come.
    pub fn builder() -> FingerprintBuilder {
        FingerprintBuilder(Sha256::new())
    }

    /// The 32 bytes of the digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl<T: AsRef<[u8]>> From<T> for Fingerprint {
    fn from(bytes: T) -> Self {
        Self::of(bytes)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "…)")
    }
}

/// Hashes the parts of a [`Fingerprint`]; made by [`Fingerprint::builder`].
#[derive(Clone)]
pub struct FingerprintBuilder(Sha256);

impl FingerprintBuilder {
    /// Adds a part (length-prefixed, so that parts never run into each other).
    pub fn part(mut self, bytes: impl AsRef<[u8]>) -> Self {
        let bytes = bytes.as_ref();
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
        self
    }

    /// The fingerprint of the parts added.
    pub fn finish(self) -> Fingerprint {
        Fingerprint(self.0.finalize().into())
    }
}

impl fmt::Debug for FingerprintBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FingerprintBuilder").finish_non_exhaustive()
    }
}
