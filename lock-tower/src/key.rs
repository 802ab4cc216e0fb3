//! Request → lock name: key templates over path, query and header values, or a closure.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::header::HeaderName;
use http::Request;
use lock_core::{KeyTemplate, LockName};

use crate::error::BuildError;
use crate::head::RequestHead;

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

/// The signature of a key function.
pub(crate) type KeyFn =
    Arc<dyn Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static>;

/// Where a placeholder takes its value.
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

    /// The lock name of a request whose matched route gave `params` (`None`: no route
    /// matched).
    pub(crate) fn resolve<B>(
        &self,
        request: &Request<B>,
        params: Option<&[(&str, Cow<'_, str>)]>,
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

/// The value of the placeholder `path`; errors name the placeholder as written.
fn resolve_one(head: &RequestHead<'_>, path: &str, source: &Source) -> Result<String, KeyError> {
    let found = match source {
        Source::PathOrQuery(name) => match head.path_param(name) {
            Some(value) => Ok(Some(Cow::Borrowed(value))),
            None => head.query_param(name),
        },
        Source::Path(name) => Ok(head.path_param(name).map(Cow::Borrowed)),
        Source::Query(name) => head.query_param(name),
        Source::Header(name) => head.header(name.as_str()).map(|v| v.map(Cow::Borrowed)),
    };
    let value = found.map_err(|error| KeyError {
        parameter: path.to_owned(),
        ..error
    })?;
    match value {
        Some(v) if v.trim().is_empty() => Err(KeyError::empty(path)),
        Some(v) => Ok(v.into_owned()),
        // Likely a layer that should have been given the route: say where it looked.
        None => Err(match source {
            Source::PathOrQuery(_) if !head.has_route() => KeyError::new(
                path,
                "is missing (no route matched the request path, so it was looked up in the query string only)",
            ),
            Source::Path(_) if !head.has_route() => {
                KeyError::new(path, "is missing (no route matched the request path)")
            }
            _ => KeyError::missing(path),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &LockName) -> String {
        String::from_utf8(n.as_bytes().to_vec()).unwrap()
    }

    /// Resolves `template` for `uri`; `params: None` means no route matched.
    fn resolve(
        template: &str,
        uri: &str,
        params: Option<&[(&str, &str)]>,
    ) -> Result<String, KeyError> {
        let spec = KeySpec::template(template).unwrap();
        let request = Request::builder()
            .uri(uri)
            .header("x-tenant", "acme corp")
            .header("x-bin", http::HeaderValue::from_bytes(b"\xff").unwrap())
            .body(())
            .unwrap();
        let params: Option<Vec<_>> =
            params.map(|p| p.iter().map(|(k, v)| (*k, Cow::Borrowed(*v))).collect());
        spec.resolve(&request, params.as_deref()).map(|n| name(&n))
    }

    #[test]
    fn bare_placeholder_prefers_the_path_then_the_query() {
        assert_eq!(
            resolve("item_<id>", "/items/7?id=9", Some(&[("id", "7")])).unwrap(),
            "item_7"
        );
        assert_eq!(resolve("item_<id>", "/items?id=9", None).unwrap(), "item_9");
        assert_eq!(
            resolve("item_<id>", "/items?id=9", Some(&[])).unwrap(),
            "item_9"
        );
    }

    #[test]
    fn explicit_sources_only_look_where_they_say() {
        assert_eq!(
            resolve("item_<query.id>", "/items/7?id=9", Some(&[("id", "7")])).unwrap(),
            "item_9"
        );
        let err = resolve("item_<path.id>", "/items?id=9", Some(&[])).unwrap_err();
        assert_eq!(err.to_string(), "key parameter `path.id` is missing");
        assert_eq!(
            resolve("t_<header.x-tenant>:<id>", "/?id=1", None).unwrap(),
            "t_acme%20corp:1"
        );
        assert_eq!(
            resolve("t_<header.X-Tenant>", "/", None).unwrap(),
            "t_acme%20corp"
        );
    }

    #[test]
    fn values_are_decoded_then_encoded_so_names_cannot_collide() {
        // `a:b` + `c` and `a` + `b:c` must not render the same name.
        let one = resolve("<a>:<b>", "/?a=x%3Ay&b=z", None).unwrap();
        let two = resolve("<a>:<b>", "/?a=x&b=y%3Az", None).unwrap();
        assert_ne!(one, two);
        assert_eq!(one, "x%3Ay:z");
        assert_eq!(resolve("<q>", "/?q=a+b%2Bc", None).unwrap(), "a%20b%2Bc");
        assert_eq!(resolve("<q>", "/?q=%", None).unwrap(), "%25");
        assert_eq!(
            resolve("<id>", "/", Some(&[("id", "é/")])).unwrap(),
            "%C3%A9%2F"
        );
    }

    #[test]
    fn missing_empty_and_invalid_values_name_the_parameter() {
        let missing = resolve("item_<id>", "/items", Some(&[])).unwrap_err();
        assert_eq!(missing, KeyError::missing("id"));
        assert_eq!(missing.to_string(), "key parameter `id` is missing");
        let empty = resolve("item_<id>", "/items?id=", None).unwrap_err();
        assert_eq!(empty.to_string(), "key parameter `id` is empty");
        let blank = resolve("item_<id>", "/items?id=+", None).unwrap_err();
        assert_eq!(blank.parameter(), "id");
        let bad = resolve("item_<query.id>", "/items?id=%FF", None).unwrap_err();
        assert_eq!(bad.parameter(), "query.id");
        assert!(bad.reason().contains("UTF-8"), "{bad}");
        let header = resolve("<header.x-bin>", "/", None).unwrap_err();
        assert_eq!(
            header.to_string(),
            "key parameter `header.x-bin` is not visible ASCII"
        );
        let absent = resolve("<header.x-none>", "/", None).unwrap_err();
        assert_eq!(absent, KeyError::missing("header.x-none"));
    }

    /// A layer without the route falls back to the query: the 400 says so, not just
    /// "missing" for a parameter that is plainly in the path.
    #[test]
    fn missing_values_without_a_route_say_where_they_were_looked_up() {
        let err = resolve("item_<id>", "/items/7/buy", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key parameter `id` is missing (no route matched the request path, so it was \
             looked up in the query string only)"
        );
        let err = resolve("item_<path.id>", "/items/7/buy", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key parameter `path.id` is missing (no route matched the request path)"
        );
        let err = resolve("item_<query.id>", "/items/7/buy", None).unwrap_err();
        assert_eq!(err, KeyError::missing("query.id"));
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
        let params = [("id", Cow::Borrowed("5"))];
        assert_eq!(
            name(&spec.resolve(&request, Some(&params)).unwrap()),
            "t/5/POST"
        );
        assert_eq!(
            spec.resolve(&request, None).unwrap_err(),
            KeyError::missing("id")
        );
    }
}
