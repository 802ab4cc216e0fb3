//! Request → lock name: key templates over path, query and header values, or a closure.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::header::HeaderName;
use http::request::Parts;
use lock_core::{KeyTemplate, LockName};

use crate::error::BuildError;
use crate::head::RequestHead;

/// Why no lock name could be made for a request. The request is answered `400 Bad Request`
/// (`INVALID_ARGUMENT` for gRPC) and no lock is attempted. The answer names the parameter,
/// unless the layer's configuration is at fault (see [`is_misconfiguration`](Self::is_misconfiguration)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key parameter `{parameter}` {reason}")]
pub struct KeyError {
    parameter: String,
    reason: Cow<'static, str>,
    misconfigured: bool,
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
            misconfigured: false,
        }
    }

    /// A placeholder the layer can never fill for this request: the route has no such path
    /// parameter, or no route is known. Not the client's fault.
    pub(crate) fn misconfigured(
        parameter: impl Into<String>,
        reason: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            misconfigured: true,
            ..Self::new(parameter, reason)
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

    /// True when the layer's configuration, not the request, is at fault: a path
    /// placeholder that the matched route does not define, or a layer that no route
    /// reaches. The client is answered a generic `400` (the details are logged at `error`).
    pub fn is_misconfiguration(&self) -> bool {
        self.misconfigured
    }
}

/// The signature of a key function.
pub(crate) type KeyFn =
    Arc<dyn Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static>;

/// Turns a placeholder's value into its canonical text, or says why it cannot (see
/// [`LockLayerBuilder::parse_as`](crate::LockLayerBuilder::parse_as)).
pub(crate) type Canonical = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync + 'static>;

/// Where a placeholder takes its value.
pub(crate) enum Source {
    /// `<id>` and `<path.id>`: the path parameter of the matched route, and nothing else.
    Path(String),
    /// `<query.id>`.
    Query(String),
    /// `<header.x-tenant>`.
    Header(HeaderName),
}

/// One distinct placeholder of a template.
pub(crate) struct Placeholder {
    /// As written: `id`, `query.id`.
    written: String,
    source: Source,
    canonical: Option<Canonical>,
}

/// How a layer names the lock of a request.
pub(crate) enum KeySpec {
    Template {
        template: KeyTemplate,
        placeholders: Vec<Placeholder>,
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
    /// Parses a template, checks every placeholder's source, and attaches the
    /// canonicalisers of `parse_as` (each must name a placeholder of the template).
    pub(crate) fn template(
        text: &str,
        mut canonical: Vec<(String, Canonical)>,
    ) -> Result<Self, BuildError> {
        let template = KeyTemplate::parse(text)?;
        let mut placeholders: Vec<Placeholder> = Vec::new();
        for path in template.placeholders() {
            if placeholders.iter().any(|p| p.written == path) {
                continue;
            }
            let at = canonical.iter().position(|(name, _)| name == path);
            placeholders.push(Placeholder {
                written: path.to_owned(),
                source: source_of(text, path)?,
                canonical: at.map(|at| canonical.swap_remove(at).1),
            });
        }
        if let Some((placeholder, _)) = canonical.into_iter().next() {
            return Err(BuildError::UnknownPlaceholder {
                template: text.to_owned(),
                placeholder,
            });
        }
        Ok(Self::Template {
            template,
            placeholders,
        })
    }

    /// The path placeholders, `(as written, parameter name)`: `<id>` and `<path.id>`.
    pub(crate) fn path_params(&self) -> impl Iterator<Item = (&str, &str)> {
        let placeholders = match self {
            Self::Template { placeholders, .. } => placeholders.as_slice(),
            Self::Fn(_) => &[],
        };
        placeholders.iter().filter_map(|p| match &p.source {
            Source::Path(name) => Some((p.written.as_str(), name.as_str())),
            _ => None,
        })
    }

    /// The lock name of a request whose matched route gave `params` (`None`: no route is
    /// known).
    pub(crate) fn resolve(
        &self,
        parts: &Parts,
        params: Option<&[(&str, Cow<'_, str>)]>,
    ) -> Result<LockName, KeyError> {
        let head = RequestHead::new(parts, params);
        match self {
            Self::Fn(f) => f(&head),
            Self::Template {
                template,
                placeholders,
            } => template.render(|path| {
                let placeholder = placeholders
                    .iter()
                    .find(|p| p.written == path)
                    .expect("every placeholder has a source");
                placeholder.resolve(&head)
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
        None => Source::Path(path.to_owned()),
        Some((_, rest)) if rest.contains('.') => return Err(unknown()),
        Some(("path", name)) => Source::Path(name.to_owned()),
        Some(("query", name)) => Source::Query(name.to_owned()),
        Some(("header", name)) => Source::Header(
            HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(|_| unknown())?,
        ),
        Some(_) => return Err(unknown()),
    })
}

impl Placeholder {
    /// This placeholder's value for `head`; errors name the placeholder as written.
    fn resolve(&self, head: &RequestHead<'_>) -> Result<String, KeyError> {
        let written = self.written.as_str();
        let found = match &self.source {
            Source::Path(name) => match head.unique_path_param(name) {
                Ok(Some(value)) => Ok(Some(Cow::Borrowed(value))),
                // Never another source: a path parameter that is not there is the layer's
                // configuration at fault, and a fallback would let the client pick the lock.
                Ok(None) if head.has_route() => {
                    return Err(KeyError::misconfigured(
                        written,
                        "is not a path parameter of the matched route",
                    ))
                }
                Ok(None) => {
                    return Err(KeyError::misconfigured(
                        written,
                        "has no matched route to come from",
                    ))
                }
                Err(error) => Err(error),
            },
            Source::Query(name) => head.query_param(name),
            Source::Header(name) => head.header(name.as_str()).map(|v| v.map(Cow::Borrowed)),
        };
        let value = found.map_err(|error| KeyError {
            parameter: written.to_owned(),
            ..error
        })?;
        match (value, &self.canonical) {
            (None, _) => Err(KeyError::missing(written)),
            (Some(v), _) if v.trim().is_empty() => Err(KeyError::empty(written)),
            (Some(v), None) => Ok(v.into_owned()),
            (Some(v), Some(canonical)) => {
                canonical(&v).map_err(|reason| KeyError::new(written, reason))
            }
        }
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
        resolve_with(
            KeySpec::template(template, Vec::new()).unwrap(),
            uri,
            params,
        )
    }

    fn resolve_with(
        spec: KeySpec,
        uri: &str,
        params: Option<&[(&str, &str)]>,
    ) -> Result<String, KeyError> {
        let (parts, ()) = http::Request::builder()
            .uri(uri)
            .header("x-tenant", "acme corp")
            .header("x-bin", http::HeaderValue::from_bytes(b"\xff").unwrap())
            .body(())
            .unwrap()
            .into_parts();
        let params: Option<Vec<_>> =
            params.map(|p| p.iter().map(|(k, v)| (*k, Cow::Borrowed(*v))).collect());
        spec.resolve(&parts, params.as_deref()).map(|n| name(&n))
    }

    /// The bypass this pins: with item 7's route matched, `?id=8` must not pick `item_8`,
    /// and without a route the query string must not stand in for the path.
    #[test]
    fn bare_placeholder_is_the_path_parameter_and_nothing_else() {
        assert_eq!(
            resolve("item_<id>", "/items/7?id=8", Some(&[("id", "7")])).unwrap(),
            "item_7"
        );
        let no_route = resolve("item_<id>", "/items?id=8", None).unwrap_err();
        assert!(no_route.is_misconfiguration(), "{no_route}");
        assert_eq!(no_route.parameter(), "id");
        let not_in_route = resolve("item_<id>", "/items?id=8", Some(&[])).unwrap_err();
        assert!(not_in_route.is_misconfiguration(), "{not_in_route}");
        assert_eq!(
            not_in_route.to_string(),
            "key parameter `id` is not a path parameter of the matched route"
        );
        assert_eq!(
            resolve("item_<path.id>", "/items/7?id=8", Some(&[("id", "7")])).unwrap(),
            "item_7"
        );
    }

    #[test]
    fn explicit_sources_only_look_where_they_say() {
        assert_eq!(
            resolve("item_<query.id>", "/items/7?id=9", Some(&[("id", "7")])).unwrap(),
            "item_9"
        );
        assert_eq!(
            resolve("t_<header.x-tenant>:<query.id>", "/?id=1", None).unwrap(),
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
        let one = resolve("<query.a>:<query.b>", "/?a=x%3Ay&b=z", None).unwrap();
        let two = resolve("<query.a>:<query.b>", "/?a=x&b=y%3Az", None).unwrap();
        assert_ne!(one, two);
        assert_eq!(one, "x%3Ay:z");
        assert_eq!(
            resolve("<query.q>", "/?q=a+b%2Bc", None).unwrap(),
            "a%20b%2Bc"
        );
        assert_eq!(resolve("<query.q>", "/?q=%", None).unwrap(), "%25");
        assert_eq!(
            resolve("<id>", "/", Some(&[("id", "é/")])).unwrap(),
            "%C3%A9%2F"
        );
    }

    #[test]
    fn missing_empty_repeated_and_invalid_values_name_the_parameter() {
        let missing = resolve("item_<query.id>", "/items", Some(&[])).unwrap_err();
        assert_eq!(missing, KeyError::missing("query.id"));
        assert!(!missing.is_misconfiguration());
        assert_eq!(missing.to_string(), "key parameter `query.id` is missing");
        let empty = resolve("item_<query.id>", "/items?id=", None).unwrap_err();
        assert_eq!(empty.to_string(), "key parameter `query.id` is empty");
        let blank = resolve("item_<id>", "/items", Some(&[("id", " ")])).unwrap_err();
        assert_eq!(blank, KeyError::empty("id"));
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
        let repeated = resolve("<query.id>", "/?id=7&id=8", None).unwrap_err();
        assert_eq!(repeated.to_string(), "key parameter `query.id` is repeated");
        let twice = resolve("<id>", "/", Some(&[("id", "7"), ("id", "8")])).unwrap_err();
        assert_eq!(twice.to_string(), "key parameter `id` is repeated");
    }

    /// Several spellings of one value must take one lock: `parse_as` puts the parsed
    /// value's text into the name.
    #[test]
    fn parse_as_canonicalises_values() {
        let spec = || {
            let canonical: Canonical = Arc::new(|t: &str| {
                t.parse::<u64>()
                    .map(|v| v.to_string())
                    .map_err(|e| e.to_string())
            });
            KeySpec::template("item_<id>", vec![("id".to_owned(), canonical)]).unwrap()
        };
        for spelling in ["7", "07", "+7", "0007"] {
            let name = resolve_with(spec(), "/", Some(&[("id", spelling)])).unwrap();
            assert_eq!(name, "item_7", "{spelling}");
        }
        let err = resolve_with(spec(), "/", Some(&[("id", "seven")])).unwrap_err();
        assert_eq!(err.parameter(), "id");
        let canonical: Canonical = Arc::new(|t: &str| Ok(t.to_owned()));
        let unknown = KeySpec::template("item_<id>", vec![("sku".to_owned(), canonical)]);
        assert!(matches!(
            unknown,
            Err(BuildError::UnknownPlaceholder { .. })
        ));
    }

    #[test]
    fn unknown_sources_fail_at_build_time() {
        for bad in ["<body.id>", "<path.a.b>", "<header.a.b>"] {
            let err = KeySpec::template(bad, Vec::new()).unwrap_err();
            assert!(
                matches!(err, BuildError::UnknownSource { .. }),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("path.<name>"), "{err}");
        }
        assert!(matches!(
            KeySpec::template("a<id", Vec::new()),
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
        let (parts, ()) = http::Request::post("/x")
            .header("x-tenant", "t")
            .body(())
            .unwrap()
            .into_parts();
        let params = [("id", Cow::Borrowed("5"))];
        assert_eq!(
            name(&spec.resolve(&parts, Some(&params)).unwrap()),
            "t/5/POST"
        );
        assert_eq!(
            spec.resolve(&parts, None).unwrap_err(),
            KeyError::missing("id")
        );
    }
}
