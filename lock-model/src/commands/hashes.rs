//! Hash commands (src/t_hash.c).

use super::NOT_INTEGER;
use crate::call::CallState;
use crate::numbers::parse_i64;
use crate::reply::Reply;

/// `HSET key field value [field value …]`: how many fields are new.
pub(super) fn hset(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    if argv.len() % 2 == 1 {
        return Reply::error("ERR wrong number of arguments for 'hset' command");
    }
    let added = state.with_hash(&argv[1], true, |hash| {
        argv[2..]
            .chunks(2)
            .filter(|pair| hash.set(&pair[0], pair[1].clone()))
            .count()
    });
    match added {
        Ok(added) => Reply::Int(added.unwrap_or(0) as i64),
        Err(wrong_type) => wrong_type,
    }
}

/// `HGET key field`.
pub(super) fn hget(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => hash
            .and_then(|h| h.get(&argv[2]))
            .map_or(Reply::Nil, Reply::bulk),
        Err(wrong_type) => wrong_type,
    }
}

/// `HMGET key field [field …]`: a nil for each missing field.
pub(super) fn hmget(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => Reply::Array(
            argv[2..]
                .iter()
                .map(|f| hash.and_then(|h| h.get(f)).map_or(Reply::Nil, Reply::bulk))
                .collect(),
        ),
        Err(wrong_type) => wrong_type,
    }
}

/// `HEXISTS key field`.
pub(super) fn hexists(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => Reply::Int(i64::from(hash.is_some_and(|h| h.get(&argv[2]).is_some()))),
        Err(wrong_type) => wrong_type,
    }
}

/// `HDEL key field [field …]`: how many were there; the key goes with its last field.
pub(super) fn hdel(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let removed = state.with_hash(&argv[1], false, |hash| {
        argv[2..].iter().filter(|f| hash.remove(f)).count()
    });
    match removed {
        Ok(removed) => Reply::Int(removed.unwrap_or(0) as i64),
        Err(wrong_type) => wrong_type,
    }
}

/// `HGETALL key`: fields and values, flat.
pub(super) fn hgetall(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => Reply::Array(
            hash.into_iter()
                .flat_map(|h| h.iter())
                .flat_map(|(f, v)| [Reply::bulk(f), Reply::bulk(v)])
                .collect(),
        ),
        Err(wrong_type) => wrong_type,
    }
}

/// `HKEYS key`.
pub(super) fn hkeys(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => Reply::Array(
            hash.into_iter()
                .flat_map(|h| h.iter())
                .map(|(f, _)| Reply::bulk(f))
                .collect(),
        ),
        Err(wrong_type) => wrong_type,
    }
}

/// `HLEN key`.
pub(super) fn hlen(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.hash(&argv[1]) {
        Ok(hash) => Reply::Int(hash.map_or(0, |h| h.len()) as i64),
        Err(wrong_type) => wrong_type,
    }
}

/// `HINCRBY key field increment`: the new value.
pub(super) fn hincrby(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let Some(increment) = parse_i64(&argv[3]) else {
        return Reply::error(NOT_INTEGER);
    };
    let current = match state.hash(&argv[1]) {
        Ok(hash) => hash.and_then(|h| h.get(&argv[2])).map(<[u8]>::to_vec),
        Err(wrong_type) => return wrong_type,
    };
    let value = match current {
        None => 0,
        Some(text) => match parse_i64(&text) {
            Some(n) => n,
            None => return Reply::error("ERR hash value is not an integer"),
        },
    };
    let Some(value) = value.checked_add(increment) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    let set = state.with_hash(&argv[1], true, |hash| {
        hash.set(&argv[2], value.to_string().into_bytes());
    });
    match set {
        Ok(_) => Reply::Int(value),
        Err(wrong_type) => wrong_type,
    }
}
