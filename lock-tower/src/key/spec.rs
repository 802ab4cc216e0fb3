//! [`KeySpec`]: how a layer names a request's lock — a key template over path, query and
//! header values, each placeholder typed, or a closure over the request head.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::header::HeaderName;
use http::request::Parts;
use lock_core::{KeyTemplate, LockName};

use crate::error::BuildError;
use crate::key::head::RequestHead;
use crate::key::typed::{ValueType, BUILTIN};
use crate::key::KeyError;

/// The signature of a key function.
pub(crate) type KeyFn =
    Arc<dyn Fn(&RequestHead<'_>) -> Result<LockName, KeyError> + Send + Sync + 'static>;

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
    ty: ValueType,
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
    /// Parses a template, checks every placeholder's source, and gives each placeholder its
    /// type: the one written in the template (`<id:u64>`) or given by `parse_as` (each must
    /// name a placeholder of the template), exactly one of them.
    pub(crate) fn template(
        text: &str,
        mut parse_as: Vec<(String, ValueType)>,
    ) -> Result<Self, BuildError> {
        let template = KeyTemplate::parse(text)?;
        let mut written: Vec<(&str, Option<&str>)> = Vec::new();
        for (path, ty) in template.typed_placeholders() {
            match written.iter_mut().find(|(p, _)| *p == path) {
                None => written.push((path, ty)),
                Some((_, first)) => match (*first, ty) {
                    (_, None) => {}
                    (None, Some(_)) => *first = ty,
                    (Some(a), Some(b)) if a == b => {}
                    (Some(_), Some(_)) => return Err(conflict(text, path)),
                },
            }
        }
        // A `parse_as` of no placeholder is a typo, and the likely cause of an untyped one.
        if let Some((placeholder, _)) = parse_as
            .iter()
            .find(|(name, _)| !written.iter().any(|(path, _)| path == name))
        {
            return Err(BuildError::UnknownPlaceholder {
                template: text.to_owned(),
                placeholder: placeholder.clone(),
            });
        }
        let mut placeholders = Vec::with_capacity(written.len());
        for (path, ty) in written {
            let given = parse_as
                .iter()
                .position(|(name, _)| name == path)
                .map(|at| parse_as.swap_remove(at).1);
            let ty = match (ty, given) {
                (Some(_), Some(_)) => return Err(conflict(text, path)),
                (None, Some(given)) => given,
                (Some(ty), None) => {
                    ValueType::builtin(ty).ok_or_else(|| BuildError::UnknownType {
                        template: text.to_owned(),
                        placeholder: path.to_owned(),
                        ty: ty.to_owned(),
                        known: BUILTIN.join(", "),
                    })?
                }
                (None, None) => {
                    return Err(BuildError::UntypedPlaceholder {
                        template: text.to_owned(),
                        placeholder: path.to_owned(),
                    })
                }
            };
            placeholders.push(Placeholder {
                written: path.to_owned(),
                source: source_of(text, path)?,
                ty,
            });
        }
        // What is left named a placeholder that an earlier `parse_as` already typed.
        if let Some((placeholder, _)) = parse_as.first() {
            return Err(conflict(text, placeholder));
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

fn conflict(template: &str, placeholder: &str) -> BuildError {
    BuildError::ConflictingTypes {
        template: template.to_owned(),
        placeholder: placeholder.to_owned(),
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
        let value = found.map_err(|error| error.for_parameter(written))?;
        match value {
            None => Err(KeyError::missing(written)),
            Some(v) if v.trim().is_empty() => Err(KeyError::empty(written)),
            Some(v) => self
                .ty
                .canonical(&v)
                .map_err(|reason| KeyError::new(written, reason)),
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
            resolve("item_<id:str>", "/items/7?id=8", Some(&[("id", "7")])).unwrap(),
            "item_7"
        );
        let no_route = resolve("item_<id:str>", "/items?id=8", None).unwrap_err();
        assert!(no_route.is_misconfiguration(), "{no_route}");
        assert_eq!(no_route.parameter(), "id");
        let not_in_route = resolve("item_<id:str>", "/items?id=8", Some(&[])).unwrap_err();
        assert!(not_in_route.is_misconfiguration(), "{not_in_route}");
        assert_eq!(
            not_in_route.to_string(),
            "key parameter `id` is not a path parameter of the matched route"
        );
        assert_eq!(
            resolve("item_<path.id:str>", "/items/7?id=8", Some(&[("id", "7")])).unwrap(),
            "item_7"
        );
    }

    #[test]
    fn explicit_sources_only_look_where_they_say() {
        assert_eq!(
            resolve("item_<query.id:str>", "/items/7?id=9", Some(&[("id", "7")])).unwrap(),
            "item_9"
        );
        assert_eq!(
            resolve("t_<header.x-tenant:str>:<query.id:str>", "/?id=1", None).unwrap(),
            "t_acme%20corp:1"
        );
        assert_eq!(
            resolve("t_<header.X-Tenant:str>", "/", None).unwrap(),
            "t_acme%20corp"
        );
    }

    #[test]
    fn values_are_decoded_then_encoded_so_names_cannot_collide() {
        // `a:b` + `c` and `a` + `b:c` must not render the same name.
        let one = resolve("<query.a:str>:<query.b:str>", "/?a=x%3Ay&b=z", None).unwrap();
        let two = resolve("<query.a:str>:<query.b:str>", "/?a=x&b=y%3Az", None).unwrap();
        assert_ne!(one, two);
        assert_eq!(one, "x%3Ay:z");
        assert_eq!(
            resolve("<query.q:str>", "/?q=a+b%2Bc", None).unwrap(),
            "a%20b%2Bc"
        );
        assert_eq!(resolve("<query.q:str>", "/?q=%", None).unwrap(), "%25");
        assert_eq!(
            resolve("<id:str>", "/", Some(&[("id", "é/")])).unwrap(),
            "%C3%A9%2F"
        );
    }

    #[test]
    fn missing_empty_repeated_and_invalid_values_name_the_parameter() {
        let missing = resolve("item_<query.id:str>", "/items", Some(&[])).unwrap_err();
        assert_eq!(missing, KeyError::missing("query.id"));
        assert!(!missing.is_misconfiguration());
        assert_eq!(missing.to_string(), "key parameter `query.id` is missing");
        let empty = resolve("item_<query.id:str>", "/items?id=", None).unwrap_err();
        assert_eq!(empty.to_string(), "key parameter `query.id` is empty");
        let blank = resolve("item_<id:str>", "/items", Some(&[("id", " ")])).unwrap_err();
        assert_eq!(blank, KeyError::empty("id"));
        let bad = resolve("item_<query.id:str>", "/items?id=%FF", None).unwrap_err();
        assert_eq!(bad.parameter(), "query.id");
        assert!(bad.reason().contains("UTF-8"), "{bad}");
        let header = resolve("<header.x-bin:str>", "/", None).unwrap_err();
        assert_eq!(
            header.to_string(),
            "key parameter `header.x-bin` is not visible ASCII"
        );
        let absent = resolve("<header.x-none:str>", "/", None).unwrap_err();
        assert_eq!(absent, KeyError::missing("header.x-none"));
        let repeated = resolve("<query.id:str>", "/?id=7&id=8", None).unwrap_err();
        assert_eq!(repeated.to_string(), "key parameter `query.id` is repeated");
        let twice = resolve("<id:str>", "/", Some(&[("id", "7"), ("id", "8")])).unwrap_err();
        assert_eq!(twice.to_string(), "key parameter `id` is repeated");
    }

    /// Several spellings of one value must take one lock: `parse_as` puts the parsed
    /// value's text into the name.
    #[test]
    fn parse_as_canonicalises_values() {
        let spec = || {
            KeySpec::template(
                "item_<id>",
                vec![("id".to_owned(), ValueType::of::<u64>("u64"))],
            )
            .unwrap()
        };
        for spelling in ["7", "07", "+7", "0007"] {
            let name = resolve_with(spec(), "/", Some(&[("id", spelling)])).unwrap();
            assert_eq!(name, "item_7", "{spelling}");
        }
        let err = resolve_with(spec(), "/", Some(&[("id", "seven")])).unwrap_err();
        assert_eq!(err.parameter(), "id");
        let unknown = KeySpec::template("item_<id:str>", vec![("sku".to_owned(), ValueType::Text)]);
        assert!(matches!(
            unknown,
            Err(BuildError::UnknownPlaceholder { .. })
        ));
    }

    /// The bypass this pins: an untyped placeholder would lock the raw text, so `08` and
    /// `8` — one item to `Path<u64>` — would take two locks. Every placeholder has a type.
    #[test]
    fn every_placeholder_has_exactly_one_type() {
        let build = |template: &str, parse_as: Vec<(String, ValueType)>| {
            KeySpec::template(template, parse_as)
                .map(|_| ())
                .unwrap_err()
        };
        let untyped = build("item_<id>", Vec::new());
        assert!(
            matches!(untyped, BuildError::UntypedPlaceholder { .. }),
            "{untyped}"
        );
        assert!(untyped.to_string().contains("`<id:u64>`"), "{untyped}");
        assert!(untyped.to_string().contains("`<id:str>`"), "{untyped}");
        let unknown = build("item_<id:f64>", Vec::new());
        assert!(
            matches!(unknown, BuildError::UnknownType { .. }),
            "{unknown}"
        );
        assert!(unknown.to_string().contains("uuid"), "{unknown}");
        let twice = build("<id:u64>:<id:str>", Vec::new());
        assert!(
            matches!(twice, BuildError::ConflictingTypes { .. }),
            "{twice}"
        );
        let both = build("<id:u64>", vec![("id".to_owned(), ValueType::Text)]);
        assert!(
            matches!(both, BuildError::ConflictingTypes { .. }),
            "{both}"
        );
        let parse_as_twice = build(
            "<id>",
            vec![
                ("id".to_owned(), ValueType::Text),
                ("id".to_owned(), ValueType::Text),
            ],
        );
        assert!(matches!(
            parse_as_twice,
            BuildError::ConflictingTypes { .. }
        ));
        // One typed occurrence types them all.
        assert!(KeySpec::template("<id:u64>:<id>", Vec::new()).is_ok());
    }

    #[test]
    fn typed_placeholders_lock_the_value_the_handler_reads() {
        let spec = || KeySpec::template("item_<id:u64>:<query.t:i64>", Vec::new()).unwrap();
        // In a query `+` is a space: `%2B0` is `+0`, as `Query<T>` reads it.
        for (id, t) in [("8", "-0"), ("08", "0"), ("+8", "%2B0"), ("008", "%2D0")] {
            let uri = format!("/?t={t}");
            let name = resolve_with(spec(), &uri, Some(&[("id", id)])).unwrap();
            assert_eq!(name, "item_8:0", "{id} {t}");
        }
        let bad = resolve_with(spec(), "/?t=1", Some(&[("id", "-8")])).unwrap_err();
        assert_eq!(bad.to_string(), "key parameter `id` is not a valid u64");
        assert!(!bad.is_misconfiguration());
    }

    #[test]
    fn unknown_sources_fail_at_build_time() {
        for bad in ["<body.id:str>", "<path.a.b:str>", "<header.a.b:str>"] {
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
