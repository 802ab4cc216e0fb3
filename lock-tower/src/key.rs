//! Request → lock name: key templates over path, query and header values, or a closure.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Method, Request, Uri};
use lock_core::{KeyTemplate, LockName};

use crate::layer::BuildError;

/// Why no lock name could be made for a request. The request is answered `400 Bad Request`
/// (`INVALID_ARGUMENT` for gRPC) with this message, and no lock is attempted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key parameter `{parameter}` {reason}")]
pub struct KeyError {
    parameter: String,
    reason: Cow<'static, str>,
}

impl KeyError {
    /// `parameter` is absent from the request.
    pub fn missing(parameter: impl Into<String>) -> Self {
        Self::new(parameter, "is missing")
    }

    /// `parameter` is present but empty.
    pub fn empty(parameter: impl Into<String>) -> Self {
        Self::new(parameter, "is empty")
    }

    /// `parameter` is present but unusable, for the given reason (lowercase, e.g.
    /// `"is not valid UTF-8"`).
    pub fn new(parameter: impl Into<String>, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            parameter: parameter.into(),
            reason: reason.into(),
        }
    }

    /// The parameter, as written in the template (`id`, `query.id`, `header.x-tenant`).
    pub fn parameter(&self) -> &str {
        &self.parameter
    }

    /// What is wrong with it (`is missing`, `is empty`, …).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// What a [key function](crate::LockLayerBuilder::key_fn) sees of a request: its head and
/// the path parameters of the matched [route](crate::LockLayerBuilder::route).
///
/// The body is not available: the lock is taken before the inner service reads it. To key
/// on a field of the body, decode it in a layer before this one and put the field into the
/// request extensions, where [`extensions`](Self::extensions) finds it.
#[derive(Debug)]
pub struct RequestHead<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
    params: &'a [(String, String)],
}

impl<'a> RequestHead<'a> {
    pub(crate) fn new<B>(request: &'a Request<B>, params: &'a [(String, String)]) -> Self {
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

    /// A path parameter of the matched route, percent-decoded.
    pub fn path_param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first query parameter `name`, decoded (`+` and `%XX`).
    ///
    /// # Errors
    /// [`KeyError`] when the value is not valid UTF-8 once decoded.
    pub fn query_param(&self, name: &str) -> Result<Option<String>, KeyError> {
        query_param(self.uri.query(), name).map_err(|reason| KeyError::new(name, reason))
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

/// The signature of a key function.
pub(crate) type KeyFn =
    Arc<dyn Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static>;

/// Where a placeholder takes its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// `<id>`: the path parameter of the matched route, else the query parameter.
    PathOrQuery(String),
    /// `<path.id>`.
    Path(String),
    /// `<query.id>`.
    Query(String),
    /// `<header.x-tenant>`.
    Header(HeaderName),
}

/// How a layer names the lock of a request.
#[derive(Clone)]
pub(crate) enum KeySpec {
    Template {
        template: KeyTemplate,
        /// One entry per distinct placeholder path.
        sources: Vec<(String, Source)>,
    },
    Fn(KeyFn),
}

impl fmt::Debug for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Template { template, .. } => f.debug_tuple("Template").field(template).finish(),
            Self::Fn(_) => f.write_str("Fn(..)"),
        }
    }
}

impl KeySpec {
    /// Parses a template and checks every placeholder's source.
    pub(crate) fn template(text: &str) -> Result<Self, BuildError> {
        let template = KeyTemplate::parse(text)?;
        let mut sources: Vec<(String, Source)> = Vec::new();
        for path in template.placeholders() {
            if sources.iter().any(|(p, _)| p == path) {
                continue;
            }
            sources.push((path.to_owned(), source_of(text, path)?));
        }
        Ok(Self::Template { template, sources })
    }

    /// The path parameters every route must define: those of `<path.…>` placeholders.
    pub(crate) fn required_path_params(&self) -> impl Iterator<Item = &str> {
        let sources = match self {
            Self::Template { sources, .. } => sources.as_slice(),
            Self::Fn(_) => &[],
        };
        sources.iter().filter_map(|(_, s)| match s {
            Source::Path(name) => Some(name.as_str()),
            _ => None,
        })
    }

    /// The lock name of a request whose matched route gave `params`.
    pub(crate) fn resolve<B>(
        &self,
        request: &Request<B>,
        params: &[(String, String)],
    ) -> Result<LockName, KeyError> {
        let head = RequestHead::new(request, params);
        match self {
            Self::Fn(f) => f(&head),
            Self::Template { template, sources } => template.render(|path| {
                let source = sources
                    .iter()
                    .find(|(p, _)| p == path)
                    .map(|(_, s)| s)
                    .expect("every placeholder has a source");
                resolve_one(&head, path, source)
            }),
        }
    }
}

fn source_of(template: &str, path: &str) -> Result<Source, BuildError> {
    let unknown = || BuildError::UnknownSource {
        template: template.to_owned(),
        placeholder: path.to_owned(),
    };
    Ok(match path.split_once('.') {
        None => Source::PathOrQuery(path.to_owned()),
        Some((_, rest)) if rest.contains('.') => return Err(unknown()),
        Some(("path", name)) => Source::Path(name.to_owned()),
        Some(("query", name)) => Source::Query(name.to_owned()),
        Some(("header", name)) => Source::Header(
            HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(|_| unknown())?,
        ),
        Some(_) => return Err(unknown()),
    })
}

fn resolve_one(head: &RequestHead<'_>, path: &str, source: &Source) -> Result<String, KeyError> {
    let value = match source {
        Source::PathOrQuery(name) => match head.path_param(name) {
            Some(v) => Some(v.to_owned()),
            None => query_param(head.uri.query(), name).map_err(|r| KeyError::new(path, r))?,
        },
        Source::Path(name) => head.path_param(name).map(str::to_owned),
        Source::Query(name) => {
            query_param(head.uri.query(), name).map_err(|r| KeyError::new(path, r))?
        }
        Source::Header(name) => match head.headers.get(name) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| KeyError::new(path, "is not visible ASCII"))?
                    .to_owned(),
            ),
        },
    };
    match value {
        None => Err(KeyError::missing(path)),
        Some(v) if v.trim().is_empty() => Err(KeyError::empty(path)),
        Some(v) => Ok(v),
    }
}

/// The first value of `name` in a query string, decoded as `application/x-www-form-urlencoded`.
fn query_param(query: Option<&str>, name: &str) -> Result<Option<String>, &'static str> {
    for pair in query.unwrap_or("").split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if decode(key, true).as_deref() == Ok(name) {
            return decode(value, true).map(Some);
        }
    }
    Ok(None)
}

/// Percent-decodes `text` (and `+` as a space when `plus`), which must then be UTF-8.
pub(crate) fn decode(text: &str, plus: bool) -> Result<String, &'static str> {
    if !text.contains(['%', '+']) {
        return Ok(text.to_owned());
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
    String::from_utf8(out).map_err(|_| "is not valid UTF-8 once percent-decoded")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &LockName) -> String {
        String::from_utf8(n.as_bytes().to_vec()).unwrap()
    }

    fn resolve(template: &str, uri: &str, params: &[(&str, &str)]) -> Result<String, KeyError> {
        let spec = KeySpec::template(template).unwrap();
        let request = Request::builder()
            .uri(uri)
            .header("x-tenant", "acme corp")
            .header("x-bin", http::HeaderValue::from_bytes(b"\xff").unwrap())
            .body(())
            .unwrap();
        let params: Vec<_> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.resolve(&request, &params).map(|n| name(&n))
    }

    #[test]
    fn bare_placeholder_prefers_the_path_then_the_query() {
        assert_eq!(
            resolve("item_<id>", "/items/7?id=9", &[("id", "7")]).unwrap(),
            "item_7"
        );
        assert_eq!(resolve("item_<id>", "/items?id=9", &[]).unwrap(), "item_9");
    }

    #[test]
    fn explicit_sources_only_look_where_they_say() {
        assert_eq!(
            resolve("item_<query.id>", "/items/7?id=9", &[("id", "7")]).unwrap(),
            "item_9"
        );
        let err = resolve("item_<path.id>", "/items?id=9", &[]).unwrap_err();
        assert_eq!(err.to_string(), "key parameter `path.id` is missing");
        assert_eq!(
            resolve("t_<header.x-tenant>:<id>", "/?id=1", &[]).unwrap(),
            "t_acme%20corp:1"
        );
        assert_eq!(
            resolve("t_<header.X-Tenant>", "/", &[]).unwrap(),
            "t_acme%20corp"
        );
    }

    #[test]
    fn values_are_decoded_then_encoded_so_names_cannot_collide() {
        // `a:b` + `c` and `a` + `b:c` must not render the same name.
        let one = resolve("<a>:<b>", "/?a=x%3Ay&b=z", &[]).unwrap();
        let two = resolve("<a>:<b>", "/?a=x&b=y%3Az", &[]).unwrap();
        assert_ne!(one, two);
        assert_eq!(one, "x%3Ay:z");
        assert_eq!(resolve("<q>", "/?q=a+b%2Bc", &[]).unwrap(), "a%20b%2Bc");
        assert_eq!(resolve("<q>", "/?q=%", &[]).unwrap(), "%25");
        assert_eq!(resolve("<id>", "/", &[("id", "é/")]).unwrap(), "%C3%A9%2F");
    }

    #[test]
    fn missing_empty_and_invalid_values_name_the_parameter() {
        let missing = resolve("item_<id>", "/items", &[]).unwrap_err();
        assert_eq!(missing, KeyError::missing("id"));
        assert_eq!(missing.to_string(), "key parameter `id` is missing");
        let empty = resolve("item_<id>", "/items?id=", &[]).unwrap_err();
        assert_eq!(empty.to_string(), "key parameter `id` is empty");
        let blank = resolve("item_<id>", "/items?id=+", &[]).unwrap_err();
        assert_eq!(blank.parameter(), "id");
        let bad = resolve("item_<id>", "/items?id=%FF", &[]).unwrap_err();
        assert!(bad.reason().contains("UTF-8"), "{bad}");
        let header = resolve("<header.x-bin>", "/", &[]).unwrap_err();
        assert_eq!(
            header.to_string(),
            "key parameter `header.x-bin` is not visible ASCII"
        );
        let absent = resolve("<header.x-none>", "/", &[]).unwrap_err();
        assert_eq!(absent, KeyError::missing("header.x-none"));
    }

    #[test]
    fn unknown_sources_fail_at_build_time() {
        for bad in ["<body.id>", "<path.a.b>", "<header.a.b>"] {
            let err = KeySpec::template(bad).unwrap_err();
            assert!(
                matches!(err, BuildError::UnknownSource { .. }),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("path.<name>"), "{err}");
        }
        assert!(matches!(
            KeySpec::template("a<id"),
            Err(BuildError::Template(_))
        ));
    }

    #[test]
    fn key_functions_see_the_head() {
        let spec = KeySpec::Fn(Arc::new(|head: &RequestHead<'_>| {
            let tenant = head
                .header("x-tenant")?
                .ok_or(KeyError::missing("x-tenant"))?;
            let id = head.path_param("id").ok_or(KeyError::missing("id"))?;
            Ok(LockName::from(format!("{tenant}/{id}/{}", head.method())))
        }));
        let request = Request::post("/x")
            .header("x-tenant", "t")
            .body(())
            .unwrap();
        let params = [("id".to_owned(), "5".to_owned())];
        assert_eq!(name(&spec.resolve(&request, &params).unwrap()), "t/5/POST");
        assert_eq!(
            spec.resolve(&request, &[]).unwrap_err(),
            KeyError::missing("id")
        );
    }

    #[test]
    fn decode_handles_plus_and_bad_escapes() {
        assert_eq!(decode("a+b", false).unwrap(), "a+b");
        assert_eq!(decode("a+b", true).unwrap(), "a b");
        assert_eq!(decode("%41%4", true).unwrap(), "A%4");
        assert!(decode("%C3", false).is_err());
    }
}
