//! String commands: GET, SET, INCR (src/t_string.c).

use super::{NOT_INTEGER, SYNTAX};
use crate::call::CallState;
use crate::keyspace::{Entry, Stored};
use crate::numbers::parse_i64;
use crate::reply::Reply;

/// `GET key`.
pub(super) fn get(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.string(&argv[1]) {
        Ok(value) => value.map_or(Reply::Nil, Reply::Bulk),
        Err(wrong_type) => wrong_type,
    }
}

/// How SET's expiry option was given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpiryOption {
    Ex,
    Px,
    Exat,
    Pxat,
}

/// SET's options, as `parseExtendedStringArgumentsOrReply` reads them: an option that
/// conflicts with one already read is a syntax error.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expiry: Option<(ExpiryOption, &'a [u8])>,
}

fn parse_set_options(argv: &[Vec<u8>]) -> Option<SetOptions<'_>> {
    let mut options = SetOptions::default();
    let mut j = 3;
    while j < argv.len() {
        let option = argv[j].to_ascii_uppercase();
        let next = argv.get(j + 1).map(Vec::as_slice);
        let kind = match option.as_slice() {
            b"EX" => Some(ExpiryOption::Ex),
            b"PX" => Some(ExpiryOption::Px),
            b"EXAT" => Some(ExpiryOption::Exat),
            b"PXAT" => Some(ExpiryOption::Pxat),
            _ => None,
        };
        // The same expiry option twice is taken (the last wins); two different ones, or
        // one beside KEEPTTL, are not.
        let free_expiry =
            !options.keepttl && options.expiry.is_none_or(|(given, _)| Some(given) == kind);
        match (option.as_slice(), next) {
            (b"NX", _) if !options.xx => options.nx = true,
            (b"XX", _) if !options.nx => options.xx = true,
            (b"GET", _) => options.get = true,
            (b"KEEPTTL", _) if options.expiry.is_none() => options.keepttl = true,
            (_, Some(value)) if kind.is_some() && free_expiry => {
                options.expiry = kind.map(|kind| (kind, value));
                j += 1;
            }
            _ => return None,
        }
        j += 1;
    }
    Some(options)
}

/// The absolute expiry (ms) of SET's option, or its error (`getExpireMillisecondsOrReply`).
fn expiry_at(now: i64, kind: ExpiryOption, value: &[u8]) -> Result<i64, Reply> {
    let invalid = || Reply::error("ERR invalid expire time in 'set' command");
    let Some(n) = parse_i64(value) else {
        return Err(Reply::error(NOT_INTEGER));
    };
    let seconds = matches!(kind, ExpiryOption::Ex | ExpiryOption::Exat);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if seconds { n * 1000 } else { n };
    let when = match kind {
        ExpiryOption::Ex | ExpiryOption::Px => ms.checked_add(now).ok_or_else(invalid)?,
        ExpiryOption::Exat | ExpiryOption::Pxat => ms,
    };
    if when <= 0 {
        return Err(invalid());
    }
    Ok(when)
}

/// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT t|KEEPTTL]`.
pub(super) fn set(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let Some(options) = parse_set_options(argv) else {
        return Reply::error(SYNTAX);
    };
    let when = match options.expiry {
        Some((kind, value)) => match expiry_at(state.now, kind, value) {
            Ok(when) => Some(when),
            Err(error) => return error,
        },
        None => None,
    };
    let key = &argv[1];
    let old = if options.get {
        match state.string(key) {
            Ok(old) => Some(old),
            Err(wrong_type) => return wrong_type,
        }
    } else {
        None
    };
    let found = state.live(key).cloned();
    let answer = |old: Option<Option<Vec<u8>>>, ok: Reply| match old {
        Some(value) => value.map_or(Reply::Nil, Reply::Bulk),
        None => ok,
    };
    if (options.nx && found.is_some()) || (options.xx && found.is_none()) {
        return answer(old, Reply::Nil);
    }
    let expires_at = match when {
        Some(when) => Some(when),
        None if options.keepttl => found.and_then(|e| e.expires_at),
        None => None,
    };
    state.put(
        key,
        Entry {
            value: Stored::String(argv[2].clone()),
            expires_at,
        },
    );
    answer(old, Reply::Status("OK".to_owned()))
}

/// `INCR key`: keeps the key's expiry.
pub(super) fn incr(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    let current = match state.string(key) {
        Ok(value) => value,
        Err(wrong_type) => return wrong_type,
    };
    let value = match current {
        None => 0,
        Some(text) => match parse_i64(&text) {
            Some(n) => n,
            None => return Reply::error(NOT_INTEGER),
        },
    };
    let Some(value) = value.checked_add(1) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    let expires_at = state.live(key).and_then(|e| e.expires_at);
    state.put(
        key,
        Entry {
            value: Stored::String(value.to_string().into_bytes()),
            expires_at,
        },
    );
    Reply::Int(value)
}
