//! [`RequestHead`]: what a key sees of a request, and the URL decoding of its values.

use std::borrow::Cow;

use http::{Extensions, HeaderMap, Method, Request, Uri};

use crate::key::KeyError;

/// What a [key function](crate::LockLayerBuilder::key_fn) sees of a request: its head and
/// the path parameters of the matched route.
///
/// The body is not available: the lock is taken before the inner service reads it. See
/// [locking on a field of the body](crate#locking-on-a-field-of-the-body).
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
    pub(crate) fn new<B>(
        request: &'a Request<B>,
        params: Option<&'a [(&'a str, Cow<'a, str>)]>,
    ) -> Self {
        Self {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
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

    /// True when a route matched the request, so that path parameters are known.
    pub(crate) fn has_route(&self) -> bool {
        self.params.is_some()
    }

    /// A path parameter of the matched route, percent-decoded.
    pub fn path_param(&self, name: &str) -> Option<&'a str> {
        let params = self.params?;
        params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }

    /// The first query parameter `name`, decoded (`+` and `%XX`).
    ///
    /// # Errors
    /// [`KeyError`] when the value is not valid UTF-8 once decoded.
    pub fn query_param(&self, name: &str) -> Result<Option<Cow<'a, str>>, KeyError> {
        let query = self.uri.query().unwrap_or("");
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if decode(key, true).as_deref() == Ok(name) {
                return decode(value, true)
                    .map(Some)
                    .map_err(|reason| KeyError::new(name, reason));
            }
        }
        Ok(None)
    }

    /// The first value of header `name` as text.
    ///
    /// # Errors
    /// [`KeyError`] when the value is not visible ASCII.
    pub fn header(&self, name: &str) -> Result<Option<&'a str>, KeyError> {
        self.headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map_err(|_| KeyError::new(name, "is not visible ASCII"))
            })
            .transpose()
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
        let request = Request::get("/?a%20b=1&c=x+y&c=2").body(()).unwrap();
        let head = RequestHead::new(&request, None);
        assert_eq!(head.query_param("a b").unwrap().as_deref(), Some("1"));
        assert_eq!(head.query_param("c").unwrap().as_deref(), Some("x y"));
        assert_eq!(head.query_param("d").unwrap(), None);
        assert!(head.path_param("a").is_none());
    }
}
