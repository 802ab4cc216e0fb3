//! [`Reply`]: what a node answers, as RESP2 carries it.

/// A reply as a Redis server sends it over RESP2 (what a client of the library reads).
/// `Error` holds the whole message, code first (`WRONGTYPE Operation against…`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// A nil bulk string or nil array.
    Nil,
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// A status (simple string), e.g. `OK`, `hash`.
    Status(String),
    /// An error: its code, a space, then its message.
    Error(String),
    /// An array.
    Array(Vec<Reply>),
}

impl Reply {
    /// A bulk string of `text`.
    pub fn bulk(text: impl AsRef<[u8]>) -> Self {
        Self::Bulk(text.as_ref().to_vec())
    }

    /// An error reply of `message` (code first).
    pub(crate) fn error(message: impl Into<String>) -> Self {
        Self::Error(message.into())
    }

    /// The code of an error reply (its first word: `ERR`, `WRONGTYPE`, `TRYAGAIN`…), or
    /// `None` for any other reply.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Self::Error(message) => message.split(' ').next(),
            _ => None,
        }
    }

    /// The reply as the `redis` crate decodes it from the wire, so lock-core's reply
    /// parsers (`FromRedisValue`) read it: an error becomes `Value::ServerError` with the
    /// code and detail the crate's own parser gives it, `OK` becomes `Value::Okay`.
    pub fn to_value(&self) -> redis::Value {
        match self {
            Self::Nil => redis::Value::Nil,
            Self::Int(n) => redis::Value::Int(*n),
            Self::Bulk(bytes) => redis::Value::BulkString(bytes.clone()),
            Self::Status(text) if text == "OK" => redis::Value::Okay,
            Self::Status(text) => redis::Value::SimpleString(text.clone()),
            Self::Error(message) => server_error(message),
            Self::Array(items) => redis::Value::Array(items.iter().map(Self::to_value).collect()),
        }
    }
}

impl From<Reply> for redis::Value {
    fn from(reply: Reply) -> Self {
        reply.to_value()
    }
}

/// An error reply as the `redis` crate's parser makes it (the only public way to build a
/// `ServerError`). Redis never sends a line break inside an error: it writes them as spaces.
fn server_error(message: &str) -> redis::Value {
    let line = message.replace(['\r', '\n'], " ");
    redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
        .expect("an error line parses as a RESP error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_reach_the_redis_crate_with_their_code() {
        let value = Reply::error("ERR Function not found").to_value();
        let redis::Value::ServerError(error) = value else {
            panic!("not a server error: {value:?}");
        };
        assert_eq!(error.code(), "ERR");
        assert_eq!(error.details(), Some("Function not found"));
        let value = Reply::error("TRYAGAIN the slot of x is being migrated").to_value();
        let redis::Value::ServerError(error) = value else {
            panic!()
        };
        assert_eq!(error.code(), "TRYAGAIN");
        assert_eq!(Reply::Status("OK".into()).to_value(), redis::Value::Okay);
        assert_eq!(Reply::error("WRONGTYPE x").error_code(), Some("WRONGTYPE"));
    }
}
