//! The script shim: an embedded Lua 5.1 that runs library text and EVAL scripts under
//! Redis 7's rules, against a node's data.

mod convert;
mod engine;
mod eval;
mod loaded;
mod sandbox;

pub(crate) use eval::EvalEngine;
pub(crate) use loaded::{load_library, LoadedLibrary};

use mlua::{Lua, Value};

use crate::error::ModelError;

/// The value of a library-level local carried as node state: what Lua calls a scalar.
/// Numbers by their bits, so that states hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Scalar {
    Nil,
    Bool(bool),
    Number(u64),
    Str(Vec<u8>),
}

impl Scalar {
    /// The scalar of a Lua value; a table, function or other object is not one.
    fn of(value: &Value, path: &str) -> Result<Self, ModelError> {
        Ok(match value {
            Value::Nil => Self::Nil,
            Value::Boolean(b) => Self::Bool(*b),
            Value::Integer(n) => Self::Number((*n as f64).to_bits()),
            Value::Number(n) => Self::Number(n.to_bits()),
            Value::String(s) => Self::Str(s.as_bytes().to_vec()),
            other => {
                return Err(ModelError::NotModelled(format!(
                    "a library local that holds a {} after a call (`{path}`)",
                    other.type_name()
                )))
            }
        })
    }

    /// The Lua value.
    fn to_lua(&self, lua: &Lua) -> mlua::Result<Value> {
        Ok(match self {
            Self::Nil => Value::Nil,
            Self::Bool(b) => Value::Boolean(*b),
            Self::Number(bits) => Value::Number(f64::from_bits(*bits)),
            Self::Str(s) => Value::String(lua.create_string(s)?),
        })
    }
}
