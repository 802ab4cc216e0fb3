//! The idempotency key of a request: read from its header or metadata, validated, and
//! scoped to its caller in the in-flight lock's name.

use http::request::Parts;
use http::HeaderName;
use lock_core::{encode_value, LockName};

/// Why a request's key was refused (answered `400` / `INVALID_ARGUMENT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyProblem {
    Missing,
    Repeated,
    Empty,
    TooLong(usize),
    Characters,
    NoCaller,
}

impl KeyProblem {
    /// The answer's text, naming the header.
    pub(crate) fn message(&self, header: &HeaderName) -> String {
        match self {
            Self::Missing => format!("the `{header}` header is required"),
            Self::Repeated => format!("the `{header}` header is repeated"),
            Self::Empty => format!("the `{header}` header is empty"),
            Self::TooLong(max) => format!("the `{header}` header is longer than {max} characters"),
            Self::Characters => {
                format!("the `{header}` header may only hold visible ASCII characters")
            }
            Self::NoCaller => format!("no caller is known for the `{header}` header"),
        }
    }
}

/// The request's key: `Ok(None)` without the header. A structured-header string
/// (`"…"`, as the IETF draft writes it) and a bare token are the same key.
pub(crate) fn read_key<'a>(
    parts: &'a Parts,
    header: &HeaderName,
    max_len: usize,
) -> Result<Option<&'a str>, KeyProblem> {
    let mut values = parts.headers.get_all(header).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(KeyProblem::Repeated);
    }
    let bytes = value.as_bytes();
    let bytes = match bytes {
        [b'"', inner @ .., b'"'] => inner,
        _ => bytes,
    };
    if bytes.is_empty() {
        return Err(KeyProblem::Empty);
    }
    if bytes.len() > max_len {
        return Err(KeyProblem::TooLong(max_len));
    }
    if !bytes
        .iter()
        .all(|b| (0x21..=0x7e).contains(b) && *b != b'"')
    {
        return Err(KeyProblem::Characters);
    }
    Ok(Some(std::str::from_utf8(bytes).expect("ASCII")))
}

/// The in-flight lock's name: `<namespace>:<caller>:<key>` (each percent-encoded, so no
/// caller's keys can reach another's), or `<namespace>:<key>` without a caller function.
pub(crate) fn lock_name(namespace: &str, caller: Option<&str>, key: &str) -> LockName {
    let mut name = String::with_capacity(namespace.len() + key.len() + 32);
    name.push_str(namespace);
    name.push(':');
    if let Some(caller) = caller {
        encode_value(&mut name, caller);
        name.push(':');
    }
    encode_value(&mut name, key);
    LockName::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(values: &[&str]) -> Parts {
        let mut builder = http::Request::post("/");
        for v in values {
            builder = builder.header("idempotency-key", *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn read(values: &[&str]) -> Result<Option<String>, KeyProblem> {
        let header = HeaderName::from_static("idempotency-key");
        read_key(&parts(values), &header, 8).map(|k| k.map(str::to_owned))
    }

    #[test]
    fn keys_are_validated() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(read(&["abc-1"]), Ok(Some("abc-1".into())));
        assert_eq!(read(&["\"abc-1\""]), Ok(Some("abc-1".into())));
        assert_eq!(read(&["a", "b"]), Err(KeyProblem::Repeated));
        assert_eq!(read(&[""]), Err(KeyProblem::Empty));
        assert_eq!(read(&["\"\""]), Err(KeyProblem::Empty));
        assert_eq!(read(&["123456789"]), Err(KeyProblem::TooLong(8)));
        assert_eq!(read(&["a b"]), Err(KeyProblem::Characters));
        assert_eq!(read(&["a\"b"]), Err(KeyProblem::Characters));
    }

    /// Two callers' keys never share a lock, whatever they contain.
    #[test]
    fn callers_are_kept_apart() {
        let name = |caller, key| lock_name("idem", caller, key);
        assert_ne!(name(Some("a:b"), "c"), name(Some("a"), "b:c"));
        assert_ne!(name(Some("alice"), "k"), name(Some("bob"), "k"));
        assert_eq!(name(Some("alice"), "k"), name(Some("alice"), "k"));
        assert_ne!(name(None, "a:b"), name(Some("a"), "b"));
    }
}
