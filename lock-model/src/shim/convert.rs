//! Conversions between Lua values and Redis replies, as src/script_lua.c makes them
//! (RESP2): `luaArgsToRedisArgv`, `redisProtocolToLuaType` and `luaReplyToRedisReply`.

use mlua::{Lua, MultiValue, Table, Value};

use crate::error::ModelError;
use crate::numbers::format_lua_number;
use crate::reply::Reply;

/// The arguments of `redis.call` as a command's words: strings as they are, numbers as
/// Redis formats them. The error message (for `luaPushError`) when there is none, or one
/// is neither a string nor a number.
pub(crate) fn argv(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|arg| match arg {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            // mlua reads an integral Lua 5.1 number as `Integer`: the same double.
            Value::Integer(n) => Ok(format_lua_number(*n as f64).into_bytes()),
            Value::Number(n) => Ok(format_lua_number(*n).into_bytes()),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// A reply as a script sees it: integer → number, bulk → string, nil → false, status →
/// `{ok=…}`, error → `{err=…}` (flagged as counted already, as Redis flags it), array →
/// table.
pub(crate) fn to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Nil => Value::Boolean(false),
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Status(text) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(text)?)?;
            Value::Table(t)
        }
        Reply::Error(message) => Value::Table(error_table(lua, message, true)?),
        Reply::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// An error table `{err = message}`; `counted` adds the `ignore_error_stats_update` flag
/// Redis sets on an error a command already counted.
pub(crate) fn error_table(lua: &Lua, message: &str, counted: bool) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(message)?)?;
    if counted {
        t.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(t)
}

/// The number a script returns, as Redis' `(long long)` cast makes it: toward zero. Outside
/// the range of an `i64` (and for NaN) C leaves the cast undefined; x86-64, where the
/// servers run, gives `i64::MIN` (`cvttsd2si`'s "integer indefinite"), and so does the
/// model (the differential test checks it).
fn truncate(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        return i64::MIN;
    }
    n.trunc() as i64
}

/// What a script's result replies: number → integer (truncated), string → bulk, true → 1,
/// false and nil → nil, a table with a string `err` → error, with a string `ok` → status,
/// else an array up to its first nil. RESP3's `double`, `map`, `set`, `big_number` and
/// `verbatim_string` tables are not modelled.
pub(crate) fn from_lua(value: &Value) -> Result<Reply, ModelError> {
    Ok(match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(n) => Reply::Int(*n),
        Value::Number(n) => Reply::Int(truncate(*n)),
        Value::Table(t) => from_table(t)?,
        _ => Reply::Nil,
    })
}

fn from_table(t: &Table) -> Result<Reply, ModelError> {
    if let Value::String(err) = t.raw_get::<Value>("err")? {
        return Ok(Reply::Error(err.to_string_lossy()));
    }
    if let Value::String(ok) = t.raw_get::<Value>("ok")? {
        return Ok(Reply::Status(
            ok.to_string_lossy().replace(['\r', '\n'], " "),
        ));
    }
    for field in ["double", "big_number", "verbatim_string", "map", "set"] {
        if !matches!(t.raw_get::<Value>(field)?, Value::Nil) {
            return Err(ModelError::NotModelled(format!(
                "a script's reply table with a `{field}` field (RESP3)"
            )));
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i)? {
            Value::Nil => break,
            item => items.push(from_lua(&item)?),
        }
    }
    Ok(Reply::Array(items))
}
