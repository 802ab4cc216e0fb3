//! What the library's functions publish on a lock's release channel, how, and reading it
//! back.
//!
//! `library/common.lua` has the same constants (the protocol tests compare them).

/// The prefix of a grant message; the rest is `<owner>:<token>`. Published on distlock's
/// grants channel only, never on a channel Redisson reads (it decodes those as numbers).
pub(crate) const GRANT_PREFIX: &str = "distlock:grant:";

/// How release and grant messages are published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Publish {
    /// `PUBLISH`: one server, Sentinel, Redlock, or a Cluster without sharded pub/sub.
    Plain,
    /// `SPUBLISH` (Redis 7+): a Cluster, where the message then stays within the lock's
    /// shard — as Redisson 3.23+ publishes on a Cluster that supports it.
    #[cfg(feature = "cluster")]
    Sharded,
}

impl Publish {
    /// The command that publishes on this topology's channels.
    pub(crate) fn command(self) -> &'static str {
        match self {
            Self::Plain => "publish",
            #[cfg(feature = "cluster")]
            Self::Sharded => "spublish",
        }
    }
}

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
}
