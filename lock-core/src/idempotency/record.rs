//! The record an idempotency key keeps in Redis once its request completed.
//!
//! Layout: a version byte, a kind byte, the 32-byte fingerprint, then the payload (what
//! the caller stored). Binary, so that a response body needs no escaping.

use crate::idempotency::fingerprint::Fingerprint;

const VERSION: u8 = 1;
const HEADER: usize = 2 + 32;

/// What the completed request left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoredKind {
    /// Its result, in the payload.
    Result,
    /// Its result was too large to keep: the payload holds what the caller chose to keep
    /// instead (the layer keeps nothing).
    TooLarge,
}

impl StoredKind {
    fn code(self) -> u8 {
        match self {
            Self::Result => 0,
            Self::TooLarge => 1,
        }
    }
}

/// A record as stored.
pub(crate) fn encode(kind: StoredKind, fingerprint: &Fingerprint, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&[VERSION, kind.code()]);
    out.extend_from_slice(fingerprint.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// A stored record's parts; `None` for bytes this version did not write.
pub(crate) fn decode(mut bytes: Vec<u8>) -> Option<(StoredKind, Fingerprint, Vec<u8>)> {
    if bytes.len() < HEADER || bytes[0] != VERSION {
        return None;
    }
    let kind = match bytes[1] {
        0 => StoredKind::Result,
        1 => StoredKind::TooLarge,
        _ => return None,
    };
    let fingerprint = Fingerprint::from_bytes(bytes[2..HEADER].try_into().ok()?);
    bytes.drain(..HEADER);
    Some((kind, fingerprint, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_any_payload() {
        let fp = Fingerprint::of("x");
        for payload in [&b""[..], b"\0\xff\r\n", &[7u8; 4096]] {
            for kind in [StoredKind::Result, StoredKind::TooLarge] {
                let decoded = decode(encode(kind, &fp, payload)).unwrap();
                assert_eq!(decoded, (kind, fp, payload.to_vec()));
            }
        }
        assert_eq!(decode(b"garbage".to_vec()), None);
        assert_eq!(decode(vec![2; 40]), None);
    }
}
