//! [`RequestHead`]: what a key sees of a request, and the URL decoding of its values.

use std::borrow::Cow;

use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Uri};

use crate::key::KeyError;

/// What a [key function](crate::lock::LockLayerBuilder::key_fn) sees of a request: its head and
/// the path parameters of the matched route.
///
/// The body is not available: the lock is taken before the inner service reads it. See
/// [locking on a field of the body](crate::lock#locking-on-a-field-of-the-body).
#[derive(Debug)]
pub struct RequestHead<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
    /// `None` when no route matched: there are no path parameters.
    params: Option<&'a [(&'a str, Cow<'a, str>)]>,
}

impl<'a> RequestHead<'a> {
    pub(crate) fn new(parts: &'a Parts, params: Option<&'a [(&'a str, Cow<'a, str>)]>) -> Self {
        Self {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            extensions: &parts.extensions,
            params,
        }
    }

    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The request headers (gRPC metadata included).
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request extensions.
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }

    /// A path parameter of the matched route, percent-decoded; `None` when the route has
    /// no such parameter or no route is known. A name the route captured twice (an outer
    /// and a nested router's `{id}`) is `None`: which one a handler reads is not certain.
    pub fn path_param(&self, name: &str) -> Option<&'a str> {
        self.unique_path_param(name).ok().flatten()
    }

    /// True when a route matched, so that the path parameters are known.
    pub(crate) fn has_route(&self) -> bool {
        self.params.is_some()
    }

    /// [`path_param`](Self::path_param), with an error for a repeated name.
    pub(crate) fn unique_path_param(&self, name: &str) -> Result<Option<&'a str>, KeyError> {
        let Some(params) = self.params else {
            return Ok(None);
        };
        let mut found = params.iter().filter(|(k, _)| *k == name);
        match (found.next(), found.next()) {
            (Some((_, value)), None) => Ok(Some(value.as_ref())),
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(KeyError::new(name, "is repeated")),
        }
    }

    /// The query parameter `name`, decoded (`+` and `%XX`, in names too: `i%64=7` is `id`).
    ///
    /// # Errors
    /// [`KeyError`] when the value is not valid UTF-8 once decoded, or when the parameter is
    /// repeated (`?id=7&id=8`): a handler could read either one, so no lock name is made.
    pub fn query_param(&self, name: &str) -> Result<Option<Cow<'a, str>>, KeyError> {
        let query = self.uri.query().unwrap_or("");
        let mut found = None;
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if decode(key, true).as_deref() != Ok(name) {
                continue;
            }
            if found.is_some() {
                return Err(KeyError::new(name, "is repeated"));
            }
            found = Some(decode(value, true).map_err(|reason| KeyError::new(name, reason))?);
        }
        Ok(found)
    }

    /// The value of header `name` as text.
    ///
    /// # Errors
    /// [`KeyError`] when the value is not visible ASCII, or when the header is repeated: a
    /// handler could read either value, so no lock name is made.
    pub fn header(&self, name: &str) -> Result<Option<&'a str>, KeyError> {
        let mut values = self.headers.get_all(name).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(KeyError::new(name, "is repeated"));
        }
        value
            .to_str()
            .map(Some)
            .map_err(|_| KeyError::new(name, "is not visible ASCII"))
    }
}

/// Percent-decodes `text` (and `+` as a space when `plus`), which must then be UTF-8;
/// borrowed when there is nothing to decode.
pub(crate) fn decode(text: &str, plus: bool) -> Result<Cow<'_, str>, &'static str> {
    if !text.contains(['%', '+']) {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' if plus => out.push(b' '),
            b'%' => {
                let hex = |b: Option<u8>| b.and_then(|b| (b as char).to_digit(16));
                let mut peek = bytes.clone();
                match (hex(peek.next()), hex(peek.next())) {
                    (Some(hi), Some(lo)) => {
                        out.push((hi * 16 + lo) as u8);
                        bytes = peek;
                    }
                    // A lone `%` is kept, as browsers and axum do.
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| "is not valid UTF-8 once percent-decoded")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_handles_plus_and_bad_escapes() {
        assert_eq!(decode("a+b", false).unwrap(), "a+b");
        assert_eq!(decode("a+b", true).unwrap(), "a b");
        assert_eq!(decode("%41%4", true).unwrap(), "A%4");
        assert!(matches!(decode("plain", true), Ok(Cow::Borrowed("plain"))));
        assert!(decode("%C3", false).is_err());
    }

    #[test]
    fn query_parameters_are_decoded() {
        let (parts, ()) = http::Request::get("/?a%20b=1&c=x+y&i%64=2")
            .body(())
            .unwrap()
            .into_parts();
        let head = RequestHead::new(&parts, None);
        assert_eq!(head.query_param("a b").unwrap().as_deref(), Some("1"));
        assert_eq!(head.query_param("c").unwrap().as_deref(), Some("x y"));
        assert_eq!(head.query_param("id").unwrap().as_deref(), Some("2"));
        assert_eq!(head.query_param("d").unwrap(), None);
        assert!(head.path_param("a").is_none());
    }

    /// A repeated parameter or header could be read either way by the handler.
    #[test]
    fn repeated_values_are_refused() {
        let (parts, ()) = http::Request::get("/?id=7&i%64=8")
            .header("x-t", "a")
            .header("x-t", "b")
            .body(())
            .unwrap()
            .into_parts();
        let params = [("id", Cow::Borrowed("7")), ("id", Cow::Borrowed("8"))];
        let head = RequestHead::new(&parts, Some(&params));
        assert_eq!(head.query_param("id").unwrap_err().reason(), "is repeated");
        assert_eq!(head.header("x-t").unwrap_err().reason(), "is repeated");
        assert_eq!(head.path_param("id"), None);
    }
}
