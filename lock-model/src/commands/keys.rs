//! Commands on keys of any type: DEL, EXISTS, TYPE, PEXPIRE, PTTL (src/db.c,
//! src/expire.c).

use super::{not_modelled, NOT_INTEGER};
use crate::call::CallState;
use crate::error::ModelError;
use crate::numbers::parse_i64;
use crate::reply::Reply;

/// `DEL key [key …]`: how many existed.
pub(super) fn del(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let deleted = argv[1..].iter().filter(|key| state.delete(key)).count();
    Reply::Int(deleted as i64)
}

/// `EXISTS key [key …]`: how many of the keys exist, a key named twice counted twice.
pub(super) fn exists(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let found = argv[1..]
        .iter()
        .filter(|key| state.live(key).is_some())
        .count();
    Reply::Int(found as i64)
}

/// `TYPE key`: a status.
pub(super) fn type_of(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let name = state
        .live(&argv[1])
        .map_or("none", |e| e.value().type_name());
    Reply::Status(name.to_owned())
}

/// `PEXPIRE key ms`: 1 when the key exists (a time not in the future deletes it, as
/// `checkAlreadyExpired` does on a master), else 0.
pub(super) fn pexpire(state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
    if let Some(option) = argv.get(3) {
        return Err(not_modelled("PEXPIRE", option));
    }
    let Some(ms) = parse_i64(&argv[2]) else {
        return Ok(Reply::error(NOT_INTEGER));
    };
    let Some(when) = ms.checked_add(state.now) else {
        return Ok(Reply::error("ERR invalid expire time in 'pexpire' command"));
    };
    let key = &argv[1];
    if state.live(key).is_none() {
        return Ok(Reply::Int(0));
    }
    if when <= state.now {
        state.delete(key);
    } else {
        let entry = state.live_mut(key).expect("checked above: live");
        entry.expires_at = Some(when);
        state.touch(key);
    }
    Ok(Reply::Int(1))
}

/// `PTTL key`: -2 for no key, -1 for no expiry, else the ms left (0 at its last ms).
pub(super) fn pttl(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let now = state.now;
    match state.live(&argv[1]) {
        None => Reply::Int(-2),
        Some(entry) => match entry.expires_at() {
            None => Reply::Int(-1),
            Some(when) => Reply::Int((when - now).max(0)),
        },
    }
}
