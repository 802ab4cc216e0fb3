//! The commands the model knows: exactly those the library, Redisson's scripts and the
//! guarded-write workload call (a test ties this list to their texts), each with the
//! options those callers use and the error replies they can meet. Anything else fails the
//! run ([`ModelError`]), never answers.

mod hashes;
mod keys;
mod pubsub;
mod server;
mod strings;
mod zsets;

use crate::call::CallState;
use crate::error::ModelError;
use crate::reply::Reply;

/// `ERR syntax error`.
pub(crate) const SYNTAX: &str = "ERR syntax error";
/// `getLongLongFromObjectOrReply`'s error.
pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

/// A command of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `DEL key [key …]`
    Del,
    /// `EXISTS key [key …]`
    Exists,
    /// `TYPE key`
    Type,
    /// `PEXPIRE key ms` (no NX/XX/GT/LT)
    Pexpire,
    /// `PTTL key`
    Pttl,
    /// `GET key`
    Get,
    /// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`
    Set,
    /// `INCR key`
    Incr,
    /// `HSET key field value [field value …]`
    Hset,
    /// `HGET key field`
    Hget,
    /// `HMGET key field [field …]`
    Hmget,
    /// `HEXISTS key field`
    Hexists,
    /// `HDEL key field [field …]`
    Hdel,
    /// `HGETALL key`
    Hgetall,
    /// `HINCRBY key field increment`
    Hincrby,
    /// `HLEN key`
    Hlen,
    /// `HKEYS key`
    Hkeys,
    /// `ZADD key [NX|XX] [GT|LT] [CH] score member [score member …]` (no INCR)
    Zadd,
    /// `ZREM key member [member …]`
    Zrem,
    /// `ZRANGE key start stop [WITHSCORES]` (by index only)
    Zrange,
    /// `ZRANGEBYSCORE key min max [WITHSCORES]` (no LIMIT)
    Zrangebyscore,
    /// `ZSCORE key member`
    Zscore,
    /// `ZPOPMIN key` (no count)
    Zpopmin,
    /// `ZCARD key`
    Zcard,
    /// `ZCOUNT key min max`
    Zcount,
    /// `TIME`
    Time,
    /// `PUBLISH channel message`
    Publish,
    /// `SPUBLISH shardchannel message`
    Spublish,
    /// `PUBSUB NUMSUB [channel …]`
    PubsubNumsub,
    /// `PUBSUB SHARDNUMSUB [shardchannel …]`
    PubsubShardnumsub,
}

impl Command {
    /// Every command of the model.
    pub const ALL: &'static [Self] = &[
        Self::Del,
        Self::Exists,
        Self::Type,
        Self::Pexpire,
        Self::Pttl,
        Self::Get,
        Self::Set,
        Self::Incr,
        Self::Hset,
        Self::Hget,
        Self::Hmget,
        Self::Hexists,
        Self::Hdel,
        Self::Hgetall,
        Self::Hincrby,
        Self::Hlen,
        Self::Hkeys,
        Self::Zadd,
        Self::Zrem,
        Self::Zrange,
        Self::Zrangebyscore,
        Self::Zscore,
        Self::Zpopmin,
        Self::Zcard,
        Self::Zcount,
        Self::Time,
        Self::Publish,
        Self::Spublish,
        Self::PubsubNumsub,
        Self::PubsubShardnumsub,
    ];

    /// Its name in lower case; a subcommand after its container and a space
    /// (`pubsub numsub`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Del => "del",
            Self::Exists => "exists",
            Self::Type => "type",
            Self::Pexpire => "pexpire",
            Self::Pttl => "pttl",
            Self::Get => "get",
            Self::Set => "set",
            Self::Incr => "incr",
            Self::Hset => "hset",
            Self::Hget => "hget",
            Self::Hmget => "hmget",
            Self::Hexists => "hexists",
            Self::Hdel => "hdel",
            Self::Hgetall => "hgetall",
            Self::Hincrby => "hincrby",
            Self::Hlen => "hlen",
            Self::Hkeys => "hkeys",
            Self::Zadd => "zadd",
            Self::Zrem => "zrem",
            Self::Zrange => "zrange",
            Self::Zrangebyscore => "zrangebyscore",
            Self::Zscore => "zscore",
            Self::Zpopmin => "zpopmin",
            Self::Zcard => "zcard",
            Self::Zcount => "zcount",
            Self::Time => "time",
            Self::Publish => "publish",
            Self::Spublish => "spublish",
            Self::PubsubNumsub => "pubsub numsub",
            Self::PubsubShardnumsub => "pubsub shardnumsub",
        }
    }

    /// The command `argv` names (its first word, and its second for a container), or
    /// `None` when the model does not know it.
    pub fn lookup(argv: &[Vec<u8>]) -> Option<Self> {
        let word = |i: usize| {
            argv.get(i)
                .map(|w| String::from_utf8_lossy(w).to_lowercase())
        };
        let first = word(0)?;
        if first == "pubsub" {
            return match word(1).as_deref() {
                Some("numsub") => Some(Self::PubsubNumsub),
                Some("shardnumsub") => Some(Self::PubsubShardnumsub),
                _ => None,
            };
        }
        Self::ALL
            .iter()
            .copied()
            .find(|c| !c.name().contains(' ') && c.name() == first)
    }

    /// Its arity in Redis' command table (src/commands/*.json): n words exactly, or at
    /// least -n when negative.
    fn arity(self) -> i64 {
        match self {
            Self::Time => 1,
            Self::Type | Self::Pttl | Self::Get | Self::Incr | Self::Hgetall | Self::Hlen => 2,
            Self::Hkeys | Self::Zcard => 2,
            Self::Hget | Self::Hexists | Self::Zscore | Self::Publish | Self::Spublish => 3,
            Self::Hincrby | Self::Zcount => 4,
            Self::Del | Self::Exists | Self::Zpopmin => -2,
            Self::PubsubNumsub | Self::PubsubShardnumsub => -2,
            Self::Pexpire | Self::Set | Self::Hmget | Self::Hdel | Self::Zrem => -3,
            Self::Hset | Self::Zadd | Self::Zrange | Self::Zrangebyscore => -4,
        }
    }

    /// True when a read-only script may not run it: a write, or a command that may
    /// replicate (`PUBLISH`), as `scriptVerifyWriteCommandAllow` refuses them.
    fn refused_read_only(self) -> bool {
        matches!(
            self,
            Self::Del
                | Self::Pexpire
                | Self::Set
                | Self::Incr
                | Self::Hset
                | Self::Hdel
                | Self::Hincrby
                | Self::Zadd
                | Self::Zrem
                | Self::Zpopmin
                | Self::Publish
                | Self::Spublish
        )
    }

    /// Runs it (its arguments already checked against its arity).
    fn run(self, state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
        match self {
            Self::Del => Ok(keys::del(state, argv)),
            Self::Exists => Ok(keys::exists(state, argv)),
            Self::Type => Ok(keys::type_of(state, argv)),
            Self::Pexpire => keys::pexpire(state, argv),
            Self::Pttl => Ok(keys::pttl(state, argv)),
            Self::Get => Ok(strings::get(state, argv)),
            Self::Set => Ok(strings::set(state, argv)),
            Self::Incr => Ok(strings::incr(state, argv)),
            Self::Hset => Ok(hashes::hset(state, argv)),
            Self::Hget => Ok(hashes::hget(state, argv)),
            Self::Hmget => Ok(hashes::hmget(state, argv)),
            Self::Hexists => Ok(hashes::hexists(state, argv)),
            Self::Hdel => Ok(hashes::hdel(state, argv)),
            Self::Hgetall => Ok(hashes::hgetall(state, argv)),
            Self::Hincrby => Ok(hashes::hincrby(state, argv)),
            Self::Hlen => Ok(hashes::hlen(state, argv)),
            Self::Hkeys => Ok(hashes::hkeys(state, argv)),
            Self::Zadd => zsets::zadd(state, argv),
            Self::Zrem => Ok(zsets::zrem(state, argv)),
            Self::Zrange => zsets::zrange(state, argv),
            Self::Zrangebyscore => zsets::zrangebyscore(state, argv),
            Self::Zscore => Ok(zsets::zscore(state, argv)),
            Self::Zpopmin => zsets::zpopmin(state, argv),
            Self::Zcard => Ok(zsets::zcard(state, argv)),
            Self::Zcount => Ok(zsets::zcount(state, argv)),
            Self::Time => server::time(state),
            Self::Publish => Ok(pubsub::publish(state, argv, false)),
            Self::Spublish => Ok(pubsub::publish(state, argv, true)),
            Self::PubsubNumsub => Ok(pubsub::numsub(state, argv, false)),
            Self::PubsubShardnumsub => Ok(pubsub::numsub(state, argv, true)),
        }
    }
}

/// Runs `argv` as `redis.call` does from a script (`scriptCall`): the command's arity,
/// then the read-only rule, then the command. Refusals are Redis' script errors.
pub(crate) fn run_from_script(
    state: &mut CallState,
    argv: &[Vec<u8>],
) -> Result<Reply, ModelError> {
    if argv.len() == 1 && argv[0].eq_ignore_ascii_case(b"pubsub") {
        // The container alone: its own arity (-2) refuses it.
        return Ok(Reply::error(
            "ERR Wrong number of args calling Redis command from script",
        ));
    }
    let Some(command) = Command::lookup(argv) else {
        let words: Vec<_> = argv
            .iter()
            .take(2)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        return Err(ModelError::UnknownCommand(words.join(" ")));
    };
    let argc = argv.len() as i64;
    let arity = command.arity();
    if (arity > 0 && arity != argc) || argc < -arity {
        return Ok(Reply::error(
            "ERR Wrong number of args calling Redis command from script",
        ));
    }
    if state.read_only && command.refused_read_only() {
        return Ok(Reply::error(
            "ERR Write commands are not allowed from read-only scripts.",
        ));
    }
    command.run(state, argv)
}

/// An option of a known command that the model leaves out.
pub(crate) fn not_modelled(command: &str, option: &[u8]) -> ModelError {
    ModelError::NotModelled(format!(
        "{command}'s option `{}`",
        String::from_utf8_lossy(option)
    ))
}
