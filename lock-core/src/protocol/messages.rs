//! What the scripts publish on a lock's release channel, and reading it back.
//!
//! The constants are the one definition: the scripts get them through the header that
//! [`scripts`](crate::protocol::scripts) generates.

/// What a release publishes when nobody was handed the lock (Redisson's unlock message).
pub(crate) const RELEASE_MESSAGE: &str = "0";

/// What the release of a write lock publishes when nobody was handed it (Redisson's
/// `READ_UNLOCK_MESSAGE`, on which all of its waiters retry).
pub(crate) const WRITE_RELEASE_MESSAGE: &str = "1";

/// The prefix of a grant message; the rest is `<owner>:<token>`. Published on distlock's
/// grants channel only, never on a channel Redisson reads (it decodes those as numbers).
pub(crate) const GRANT_PREFIX: &str = "distlock:grant:";

/// One message on a release channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message<'a> {
    /// The lock was handed to `owner`, with this fencing token.
    Grant { owner: &'a str, token: u64 },
    /// A grant that cannot be read: its waiter retries on its own.
    UnreadableGrant,
    /// Anything else: a release (`0`, from distlock or Redisson), so waiters retry.
    Release,
}

impl<'a> Message<'a> {
    /// Reads a payload. A grant is `distlock:grant:<owner>:<token>` (owners contain `:`
    /// themselves, tokens do not).
    pub(crate) fn parse(payload: &'a [u8]) -> Self {
        let Some(grant) = payload.strip_prefix(GRANT_PREFIX.as_bytes()) else {
            return Self::Release;
        };
        let parsed = || {
            let (owner, token) = std::str::from_utf8(grant).ok()?.rsplit_once(':')?;
            Some(Self::Grant {
                owner,
                token: token.parse().ok()?,
            })
        };
        parsed().unwrap_or(Self::UnreadableGrant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_name_the_owner_and_token() {
        let owner = "3db65fe7-939f-4757-93a2-a2f87f354cca:17";
        let grant = format!("distlock:grant:{owner}:1795436339923456");
        assert_eq!(
            Message::parse(grant.as_bytes()),
            Message::Grant {
                owner,
                token: 1_795_436_339_923_456
            }
        );
    }

    #[test]
    fn unreadable_grants_and_releases() {
        // What Lua's `..` once made of a token above 10^14.
        assert_eq!(
            Message::parse(b"distlock:grant:u:1:1.7954357565964e+15"),
            Message::UnreadableGrant
        );
        assert_eq!(
            Message::parse(b"distlock:grant:no-token"),
            Message::UnreadableGrant
        );
        assert_eq!(Message::parse(b"0"), Message::Release);
    }

    #[test]
    fn constants_need_no_quoting_in_lua() {
        for c in [GRANT_PREFIX, RELEASE_MESSAGE] {
            assert!(!c.contains(['\'', '\\', '\n']), "{c}");
        }
    }
}
