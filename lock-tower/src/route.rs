//! Route templates in axum's syntax, matched with `matchit` as axum matches them: which
//! requests a layer locks, and their path parameters.

use std::borrow::Cow;

use crate::error::BuildError;
use crate::head::decode;
use crate::key::{KeyError, KeySpec};

/// The path parameters of a matched route: names from the template, values
/// percent-decoded (borrowed from the path unless decoding changed them).
pub(crate) type Params<'a> = Vec<(&'a str, Cow<'a, str>)>;

/// The route templates of a layer, compiled into one router.
pub(crate) struct Routes {
    router: matchit::Router<()>,
    len: usize,
}

impl Routes {
    /// Compiles `templates`; each must define the path parameters of the key's `<path.…>`
    /// placeholders.
    pub(crate) fn new(templates: &[String], key: &KeySpec) -> Result<Self, BuildError> {
        let mut router = matchit::Router::new();
        for route in templates {
            let params = route_params(route);
            if let Some(param) = key.required_path_params().find(|p| !params.contains(p)) {
                return Err(BuildError::MissingPathParam {
                    route: route.clone(),
                    param: param.to_owned(),
                });
            }
            router
                .insert(route.as_str(), ())
                .map_err(|e| BuildError::Route {
                    route: route.clone(),
                    reason: e.to_string(),
                })?;
        }
        Ok(Self {
            router,
            len: templates.len(),
        })
    }

    /// The number of templates.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The parameters of the route that matches `path`: `None` when no route does, a
    /// [`KeyError`] when a value is not UTF-8 once percent-decoded.
    pub(crate) fn at<'a>(&'a self, path: &'a str) -> Option<Result<Params<'a>, KeyError>> {
        let matched = self.router.at(path).ok()?;
        let params = matched
            .params
            .iter()
            .map(|(name, raw)| match decode(raw, false) {
                Ok(value) => Ok((name, value)),
                Err(reason) => Err(KeyError::new(name, reason)),
            });
        Some(params.collect())
    }
}

/// The parameter names of an axum/matchit route template (`{id}`, `{*rest}`; `{{` escapes).
fn route_params(route: &str) -> Vec<&str> {
    let mut params = Vec::new();
    let mut rest = route;
    while let Some(open) = rest.find('{') {
        if rest[open + 1..].starts_with('{') {
            rest = &rest[open + 2..];
            continue;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        params.push(rest[open + 1..open + close].trim_start_matches('*'));
        rest = &rest[open + close + 1..];
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_params_are_found() {
        assert_eq!(route_params("/items/{id}/buy"), ["id"]);
        assert_eq!(route_params("/a/{x}/{*rest}"), ["x", "rest"]);
        assert_eq!(route_params("/lit/{{x}}/{y}"), ["y"]);
        assert!(route_params("/orders.Orders/Place").is_empty());
    }

    #[test]
    fn matched_parameters_are_decoded() {
        let key = KeySpec::template("item_<id>").unwrap();
        let routes = Routes::new(&["/items/{id}/buy".to_owned()], &key).unwrap();
        let params = routes.at("/items/a%20b/buy").unwrap().unwrap();
        assert_eq!(params, [("id", Cow::Borrowed("a b"))]);
        assert!(routes.at("/other").is_none());
        let bad = routes.at("/items/%FF/buy").unwrap().unwrap_err();
        assert_eq!(bad.parameter(), "id");
    }
}
