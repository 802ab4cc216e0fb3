//! A guarded write: commands that commit in one call only while a hold is current
//! (`guarded_write` in `library/guarded_write.lua`), and the allow-list they are checked against before
//! anything is sent.
//!
//! The commands are the `redis` crate's own [`Pipeline`]: what a user would send anyway,
//! sent inside the function instead. Only commands whose keys are known are allowed (the
//! function declares every key it writes, as Redis Functions require, and on a Cluster all
//! of them must be of the lock's slot); nothing that runs code (`EVAL`, `FCALL`), blocks
//! (`BLPOP`), touches the server (`FLUSHALL`, `CONFIG`) or reaches other keys unseen
//! (`SORT … BY`, `RENAME` across slots) is.

use redis::{Pipeline, Value};

use crate::protocol::fcall::{Arg, Call};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::library::Function;
use crate::protocol::name::LockKeys;

/// Tells whether two keys share a Cluster slot.
pub(crate) type SameSlot<'a> = &'a dyn Fn(&[u8], &[u8]) -> bool;

/// Where a command's keys are among its arguments (after its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keys {
    /// The first argument.
    First,
    /// Every argument (`DEL a b c`).
    All,
    /// Every other argument from the first (`MSET k v k v`).
    Pairs,
}

/// The commands a guarded write may run, and where their keys are: strings, hashes, lists,
/// sets, sorted sets, streams and key expiry. Anything else is refused before sending.
fn allowed(name: &str) -> Option<Keys> {
    let keys = match name {
        "GET" | "SET" | "SETNX" | "SETEX" | "PSETEX" | "GETSET" | "GETDEL" | "GETEX" | "APPEND"
        | "INCR" | "INCRBY" | "INCRBYFLOAT" | "DECR" | "DECRBY" | "STRLEN" | "SETRANGE"
        | "GETRANGE" => Keys::First,
        "HSET" | "HSETNX" | "HGET" | "HMGET" | "HDEL" | "HINCRBY" | "HINCRBYFLOAT" | "HGETALL"
        | "HEXISTS" | "HLEN" | "HKEYS" | "HVALS" => Keys::First,
        "LPUSH" | "RPUSH" | "LPOP" | "RPOP" | "LRANGE" | "LLEN" | "LREM" | "LSET" | "LTRIM"
        | "LINDEX" => Keys::First,
        "SADD" | "SREM" | "SISMEMBER" | "SMEMBERS" | "SCARD" => Keys::First,
        "ZADD" | "ZREM" | "ZINCRBY" | "ZSCORE" | "ZRANGE" | "ZCARD" | "ZRANK" | "ZCOUNT" => {
            Keys::First
        }
        "XADD" | "XLEN" | "XTRIM" | "XDEL" => Keys::First,
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" | "PERSIST" | "TTL" | "PTTL" | "TYPE" => {
            Keys::First
        }
        "DEL" | "UNLINK" | "EXISTS" | "MGET" => Keys::All,
        "MSET" => Keys::Pairs,
        _ => return None,
    };
    Some(keys)
}

/// The answer to GUARDED_WRITE: the commands' replies, or `None` when the hold was not
/// current (nothing ran).
#[derive(Debug)]
pub(crate) struct GuardedReply(pub(crate) Option<Value>);

impl redis::FromRedisValue for GuardedReply {
    fn from_redis_value(v: Value) -> Result<Self, redis::ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(v)?.into_iter();
        let ran = i64::from_redis_value(items.next().unwrap_or(Value::Nil))? == 1;
        Ok(Self(
            ran.then(|| items.next().unwrap_or(Value::Array(Vec::new()))),
        ))
    }
}

/// A GUARDED_WRITE call of `commands` under `owner`'s hold of `keys` with `token`, or why
/// it cannot be sent: a kind without an exclusive hold, a command not on the allow-list, a
/// key of another slot (on a Cluster, `same_slot` tells whether two keys share one) or one of the lock's
/// own keys.
pub(crate) fn guarded_write(
    keys: &LockKeys,
    owner: &str,
    token: u64,
    commands: &Pipeline,
    same_slot: Option<SameSlot<'_>>,
) -> Result<Call<GuardedReply>, String> {
    if keys.mode() == LockMode::Read {
        return Err(
            "a read hold shares the name with other readers: guarded writes \
                    need an exclusive lock, the write lock or a permit"
                .to_owned(),
        );
    }
    let mode = keys.mode().letter();
    let mut words: Vec<Vec<u8>> = Vec::new();
    let mut written: Vec<Vec<u8>> = Vec::new();
    let mut count = 0_usize;
    for cmd in commands.cmd_iter() {
        let args: Vec<&[u8]> = (cmd.args_iter())
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        let Some((first, rest)) = args.split_first() else {
            continue;
        };
        let name = String::from_utf8_lossy(first).to_ascii_uppercase();
        let Some(positions) = allowed(&name) else {
            return Err(format!(
                "`{name}` may not run in a guarded write: see the allow-list of \
                 LockGuard::write"
            ));
        };
        let cmd_keys: Vec<&[u8]> = match positions {
            Keys::First => rest.iter().take(1).copied().collect(),
            Keys::All => rest.to_vec(),
            Keys::Pairs => rest.iter().step_by(2).copied().collect(),
        };
        if cmd_keys.is_empty() {
            return Err(format!("`{name}` names no key"));
        }
        for key in cmd_keys {
            check_key(keys, key, same_slot)?;
            if !written.iter().any(|k| k == key) {
                written.push(key.to_vec());
            }
        }
        words.push(args.len().to_string().into_bytes());
        words.extend(args.iter().map(|w| w.to_vec()));
        count += 1;
    }
    let count = count.to_string();
    let mut head = vec![
        Arg::Str(owner),
        // The token as COMPLETE sends it: its decimal text, which `is_current` compares.
        Arg::Int(token),
        Arg::Str(mode),
        Arg::Str(&count),
    ];
    head.extend(words.iter().map(|w| Arg::Bytes(w)));
    // The lock, a permit's records, then the written keys.
    let lock_keys = keys.in_key_order().enumerate().filter_map(|(i, key)| {
        let records = keys.mode() == LockMode::Permit && i == 2;
        (i == 0 || records).then_some(key)
    });
    let all = lock_keys.chain(written.iter().map(|k| ("", k.as_slice())));
    Ok(Call::new(
        Function::GuardedWrite,
        keys.is_sharded(),
        all,
        &head,
    ))
}

/// Refuses a key of another slot than the lock's (on a Cluster) and the lock's own keys.
fn check_key(keys: &LockKeys, key: &[u8], same_slot: Option<SameSlot<'_>>) -> Result<(), String> {
    let shown = String::from_utf8_lossy(key);
    let own = key == keys.lock()
        || keys.in_key_order().any(|(prefix, rest)| {
            !prefix.is_empty() && key.starts_with(prefix.as_bytes()) && key.ends_with(rest)
        })
        || key.starts_with(b"distlock__")
        || key.starts_with(b"redisson_");
    if own {
        return Err(format!("`{shown}` is one of the lock's own keys"));
    }
    if same_slot.is_some_and(|same| !same(key, keys.lock())) {
        return Err(format!(
            "key `{shown}` is not in the lock's Cluster slot: a guarded write only writes \
             keys of the lock's slot (name them with LockGuard::key)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(mode: LockMode) -> LockKeys {
        LockKeys::for_key(b"p:item_7", mode, false)
    }

    #[test]
    fn commands_go_as_word_counts_and_words_after_the_written_keys() {
        let mut pipe = redis::pipe();
        pipe.cmd("DECR")
            .arg("{p:item_7}:stock")
            .cmd("lpush")
            .arg("{p:item_7}:log")
            .arg("x");
        let call = guarded_write(&keys(LockMode::Exclusive), "u:1", 17, &pipe, None).unwrap();
        let words = call.words();
        assert_eq!(words[1], Function::GuardedWrite.name().as_bytes());
        assert_eq!(words[2], b"3", "the lock and two written keys");
        assert_eq!(
            words[3..6],
            [&b"p:item_7"[..], b"{p:item_7}:stock", b"{p:item_7}:log"]
        );
        assert_eq!(words[6..10], [&b"u:1"[..], b"17", b"x", b"2"]);
        assert_eq!(words[10..13], [&b"2"[..], b"DECR", b"{p:item_7}:stock"]);
        assert_eq!(words[13..], [&b"3"[..], b"lpush", b"{p:item_7}:log", b"x"]);
        let permit = guarded_write(&keys(LockMode::Permit), "u:1", 17, &pipe, None).unwrap();
        assert_eq!(permit.words()[4], b"distlock__holders:{p:item_7}");
    }

    #[test]
    fn what_is_not_on_the_allow_list_is_refused_by_name() {
        for (command, word) in [
            ("EVAL", "EVAL"),
            ("blpop", "BLPOP"),
            ("FLUSHALL", "FLUSHALL"),
        ] {
            let mut pipe = redis::pipe();
            pipe.cmd(command).arg("k");
            let refused = guarded_write(&keys(LockMode::Exclusive), "u", 1, &pipe, None);
            let reason = refused.expect_err("refused");
            assert!(reason.contains(&format!("`{word}`")), "{reason}");
        }
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg("k").arg("v");
        let read = guarded_write(&keys(LockMode::Read), "u", 1, &pipe, None);
        assert!(read.err().unwrap().contains("read hold"));
    }

    #[test]
    fn the_locks_own_keys_and_other_slots_are_refused() {
        for key in [
            "p:item_7",
            "distlock__wait:{p:item_7}",
            "distlock__holders:{x}",
        ] {
            let mut pipe = redis::pipe();
            pipe.cmd("DEL").arg("other").arg(key);
            let reason = guarded_write(&keys(LockMode::Permit), "u", 1, &pipe, None).unwrap_err();
            assert!(reason.contains("lock's own keys"), "{key}: {reason}");
        }
        let same = |a: &[u8], b: &[u8]| a.first() == b.first();
        let mut pipe = redis::pipe();
        pipe.cmd("MSET").arg("pa").arg("1").arg("qb").arg("2");
        let reason =
            guarded_write(&keys(LockMode::Exclusive), "u", 1, &pipe, Some(&same)).unwrap_err();
        assert!(
            reason.contains("`qb`") && reason.contains("slot"),
            "{reason}"
        );
    }
}
