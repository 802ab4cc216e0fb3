//! Lock names and the Redis keys derived from them.

use std::fmt;

use crate::protocol::kind::mode::LockMode;
use crate::protocol::kind::GRANTS_PREFIX;

/// The name of a lock: any bytes the application chooses.
///
/// Names are encoded before they reach Redis so that no byte in a name can move the lock to
/// another Cluster slot or make two names collide: `%`, `{`, `}` and control bytes are
/// percent-escaped, everything else is kept as it is. The lock key is
/// `<prefix><encoded name>`, which contains no braces, and every companion key (waiter
/// queue, Redlock's fence floor) and the release channel carry the whole
/// lock key as its hash tag, so all of them share the lock's Cluster slot.
///
/// A name that is empty or longer than the client's limit (see
/// [`LockClientBuilder::max_name_len`](crate::LockClientBuilder::max_name_len)) is rejected
/// with [`LockError::InvalidName`](crate::LockError::InvalidName).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockName(Vec<u8>);

impl LockName {
    /// Creates a name from raw bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The raw bytes of the name, as the application gave them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Why this name cannot be a lock's (empty, or longer than `max_len` bytes), if so.
    pub(crate) fn invalid_reason(&self, max_len: usize) -> Option<String> {
        if self.0.is_empty() {
            Some("a lock name must not be empty".to_owned())
        } else if self.0.len() > max_len {
            Some(format!(
                "{} bytes is longer than the limit of {max_len} bytes",
                self.0.len()
            ))
        } else {
            None
        }
    }
}

impl From<&str> for LockName {
    fn from(s: &str) -> Self {
        Self(s.as_bytes().to_vec())
    }
}

impl From<String> for LockName {
    fn from(s: String) -> Self {
        Self(s.into_bytes())
    }
}

impl From<&String> for LockName {
    fn from(s: &String) -> Self {
        Self::from(s.as_str())
    }
}

impl From<&[u8]> for LockName {
    fn from(b: &[u8]) -> Self {
        Self(b.to_vec())
    }
}

impl From<Vec<u8>> for LockName {
    fn from(b: Vec<u8>) -> Self {
        Self(b)
    }
}

impl From<&LockName> for LockName {
    fn from(n: &LockName) -> Self {
        n.clone()
    }
}

/// Longest rendering of a name in messages; error texts must stay readable for 10 kB names.
const DISPLAY_MAX: usize = 80;

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = String::from_utf8_lossy(&self.0);
        for (shown, c) in text.chars().enumerate() {
            if shown >= DISPLAY_MAX {
                return write!(f, "…({} bytes)", self.0.len());
            }
            write!(f, "{}", c.escape_debug())?;
        }
        Ok(())
    }
}

impl fmt::Debug for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockName(\"{self}\")")
    }
}

/// The Redis keys of one lock. All of them hash to the slot of the lock key. The holder
/// record is a field of the lock hash (see [`crate::protocol`]), and the channel is not a key.
///
/// One buffer holds them all: the release channel (Redisson's
/// `redisson_lock__channel:{<lock key>}` for a lock, `redisson_rwlock:{<lock key>}` for a
/// read-write lock, see [`LockMode::channel_prefix`]) contains the lock key, and every
/// companion key is a constant prefix before the same `{<lock key>}`. So deriving the keys of a lock costs one
/// allocation, and the companions are written straight into the function call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LockKeys {
    channel: Vec<u8>,
    /// What the lock is: its functions and its layout.
    mode: LockMode,
    /// Redlock only: the functions also take the fence floor, so that a later majority's
    /// tokens are greater. One server, a Cluster or Sentinel: three keys.
    fenced: bool,
    /// Cluster only: the functions first check that the lock's slot is not being migrated to
    /// another node (see `migrating` in `library/register.lua`).
    sharded: bool,
}

impl LockKeys {
    /// Derives the keys of `name` under `prefix` (already validated brace-free; the name is
    /// checked with [`LockName::invalid_reason`] first); `fenced` under Redlock.
    pub(crate) fn new(prefix: &str, name: &LockName, kind: LockMode, fenced: bool) -> Self {
        let channel_prefix = kind.channel_prefix();
        // Exact for names without escapes; escaped bytes grow it once.
        let len = channel_prefix.len() + prefix.len() + name.0.len() + 2;
        let mut channel = Vec::with_capacity(len);
        channel.extend_from_slice(channel_prefix.as_bytes());
        channel.push(b'{');
        channel.extend_from_slice(prefix.as_bytes());
        encode_into(&mut channel, name.as_bytes());
        channel.push(b'}');
        Self {
            channel,
            mode: kind,
            fenced,
            sharded: false,
        }
    }

    /// The same keys, on a Cluster when `sharded`: their functions check for a migration.
    pub(crate) fn sharded(mut self, sharded: bool) -> Self {
        self.sharded = sharded;
        self
    }

    /// Whether the lock lives on a Cluster (its functions check for a migration).
    pub(crate) fn is_sharded(&self) -> bool {
        self.sharded
    }

    /// The keys of the lock of `kind` whose Redis key is `lock` (as found by a scan).
    pub(crate) fn for_key(lock: &[u8], kind: LockMode, fenced: bool) -> Self {
        let channel = [kind.channel_prefix().as_bytes(), b"{", lock, b"}"].concat();
        Self {
            channel,
            mode: kind,
            fenced,
            sharded: false,
        }
    }

    /// The lock's own key: the Redisson-compatible hash `owner → hold count` with the holder
    /// record (a lock, a read-write lock), or a semaphore's holders.
    pub(crate) fn lock(&self) -> &[u8] {
        &self.channel[self.mode.channel_prefix().len() + 1..self.channel.len() - 1]
    }

    /// The release channel, `<kind's channel prefix>{<lock key>}`.
    pub(crate) fn channel(&self) -> &[u8] {
        &self.channel
    }

    /// The channel that grants to `owner`'s waiters on this lock travel on:
    /// `distlock__claim:{<lock key>}:<client id>`, the client id being the owner's text
    /// before its first `:` (as the library's functions read it). Same slot as the lock; one channel
    /// per waiting client, so a grant is delivered to one process only.
    pub(crate) fn grants_channel(&self, owner: &str) -> Vec<u8> {
        let tag = &self.channel[self.mode.channel_prefix().len()..];
        let client = owner.split_once(':').map_or(owner, |(client, _)| client);
        [GRANTS_PREFIX.as_bytes(), tag, b":", client.as_bytes()].concat()
    }

    /// What the lock is.
    pub(crate) fn mode(&self) -> LockMode {
        self.mode
    }

    /// The keys the functions of one lock take, in their one order: the lock, the fair queue of
    /// waiters (by arrival and by liveness deadline), then a semaphore's holder
    /// records, or under Redlock the fence floor. Each comes as two parts that spell it when joined: `("", lock key)`, or a
    /// companion's prefix and `{<lock key>}`.
    pub(crate) fn in_key_order(&self) -> impl Iterator<Item = (&'static str, &[u8])> + Clone {
        let tag = &self.channel[self.mode.channel_prefix().len()..];
        let companions = self.mode.companions(self.fenced);
        std::iter::once(("", self.lock())).chain(companions.map(move |prefix| (prefix, tag)))
    }
}

/// True for bytes that are escaped in keys: the escape itself, hash-tag braces, controls.
pub(crate) fn needs_escape(b: u8) -> bool {
    matches!(b, b'%' | b'{' | b'}' | 0..=0x1f | 0x7f)
}

/// Appends `raw` percent-escaping [`needs_escape`] bytes; injective because `%` is escaped.
pub(crate) fn encode_into(out: &mut Vec<u8>, raw: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in raw {
        if needs_escape(b) {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

/// Undoes [`encode_into`]: `%XX` becomes the byte; anything else is kept.
pub(crate) fn decode(encoded: &[u8]) -> Vec<u8> {
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut out = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let escaped = encoded
            .get(i + 1..i + 3)
            .and_then(|h| Some(hex(h[0])? << 4 | hex(h[1])?));
        match escaped {
            Some(b) if encoded[i] == b'%' => {
                out.push(b);
                i += 3;
            }
            _ => {
                out.push(encoded[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::mode::LockMode;

    fn keys(name: &[u8]) -> LockKeys {
        LockKeys::new("p:", &LockName::from(name), LockMode::Exclusive, false)
    }

    /// The keys in the functions' order, each spelled out.
    fn spelled(keys: &LockKeys) -> Vec<Vec<u8>> {
        let join = |(prefix, rest): (&str, &[u8])| [prefix.as_bytes(), rest].concat();
        keys.in_key_order().map(join).collect()
    }

    #[test]
    fn plain_names_are_kept_for_redisson_interop() {
        let k = keys(b"item_7");
        assert_eq!(k.lock(), b"p:item_7");
        assert_eq!(k.channel(), b"redisson_lock__channel:{p:item_7}");
        assert_eq!(
            k.grants_channel("0f3c-9a:12"),
            b"distlock__claim:{p:item_7}:0f3c-9a"
        );
        assert_eq!(
            spelled(&k),
            [&b"p:item_7"[..], b"distlock__wait:{p:item_7}",]
        );
        let name = LockName::from(&b"item_7"[..]);
        let redlock = LockKeys::new("p:", &name, LockMode::Exclusive, true);
        assert_eq!(spelled(&redlock)[2], b"distlock__fence:{p:item_7}");
        assert_eq!(
            LockKeys::for_key(b"p:item_7", LockMode::Exclusive, true),
            redlock
        );
        let rw = LockKeys::new("p:", &name, LockMode::Write, false);
        assert_eq!(rw.lock(), b"p:item_7");
        assert_eq!(rw.channel(), b"redisson_rwlock:{p:item_7}");
        assert_eq!(
            rw.grants_channel("0f3c-9a:12:write"),
            b"distlock__claim:{p:item_7}:0f3c-9a",
            "a writer's grants go to its client's channel too"
        );
        assert_eq!(spelled(&rw)[1], b"distlock__rwwait:{p:item_7}");
        let sem = LockKeys::new("p:", &name, LockMode::Permit, false);
        assert_eq!(sem.channel(), b"distlock__semaphore:{p:item_7}");
        assert_eq!(
            sem.grants_channel("0f3c-9a:12"),
            b"distlock__claim:{p:item_7}:0f3c-9a"
        );
        assert_eq!(
            spelled(&sem)[1..],
            [
                &b"distlock__semwait:{p:item_7}"[..],
                b"distlock__holders:{p:item_7}"
            ]
        );
    }

    #[test]
    fn braces_cannot_choose_the_hash_tag() {
        let k = keys(b"a{b}c");
        assert_eq!(k.lock(), b"p:a%7Bb%7Dc");
        assert!(!k.lock().contains(&b'{') && !k.lock().contains(&b'}'));
        assert_eq!(k.channel(), b"redisson_lock__channel:{p:a%7Bb%7Dc}");
    }

    #[test]
    fn escapes_are_injective() {
        // "%7B" literally and "{" must not collide.
        assert_ne!(keys(b"%7B").lock(), keys(b"{").lock());
        assert_eq!(keys(b"%").lock(), b"p:%25");
        assert_eq!(keys(b"a\r\n\0").lock(), b"p:a%0D%0A%00");
    }

    #[test]
    fn decoding_undoes_encoding() {
        for name in [&b"a{b}%c\r\n"[..], b"plain", b"%zz", &[0xff, b'%']] {
            let mut encoded = Vec::new();
            encode_into(&mut encoded, name);
            assert_eq!(decode(&encoded), name);
        }
    }

    #[test]
    fn non_utf8_bytes_pass_through() {
        assert_eq!(keys(&[0xff, 0xfe]).lock(), [b'p', b':', 0xff, 0xfe]);
    }

    #[test]
    fn empty_and_long_names_are_rejected() {
        let long = LockName::from(vec![b'x'; 10_000]);
        let reason = long.invalid_reason(1024).unwrap();
        assert!(reason.contains("10000 bytes"), "{reason}");
        assert!(LockName::from("").invalid_reason(1024).is_some());
        assert_eq!(LockName::from("x").invalid_reason(1), None);
    }

    #[test]
    fn display_is_escaped_and_bounded() {
        assert_eq!(LockName::from("a\nb").to_string(), "a\\nb");
        let shown = LockName::from(vec![b'x'; 10_000]).to_string();
        assert!(shown.len() < 120 && shown.ends_with("(10000 bytes)"));
    }
}
