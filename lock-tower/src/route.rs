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
        Ok(Self { router })
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

#[cfg(feature = "axum")]
pub(crate) use matched::AxumRoutes;

#[cfg(feature = "axum")]
mod matched {
    use std::collections::HashMap;
    use std::sync::{Arc, PoisonError, RwLock};

    use axum::extract::{MatchedPath, OriginalUri};

    use super::Routes;

    /// The routes axum matched (its `MatchedPath` extension), compiled once per template,
    /// for layers without routes of their own.
    #[derive(Default)]
    pub(crate) struct AxumRoutes {
        compiled: RwLock<HashMap<Box<str>, Arc<Routes>>>,
    }

    impl AxumRoutes {
        /// At most this many templates are kept: an app's route table is bounded, but one
        /// layer may serve many routers.
        const CAPACITY: usize = 1024;

        /// The route axum matched for `request`, and the path to match it against: the
        /// `OriginalUri`'s, since `Router::nest` strips its prefix from the URI but not from
        /// the matched route.
        pub(crate) fn matched<'r, B>(
            &self,
            request: &'r http::Request<B>,
        ) -> Option<(Arc<Routes>, &'r str)> {
            let extensions = request.extensions();
            let template = extensions.get::<MatchedPath>()?.as_str();
            let uri = match extensions.get::<OriginalUri>() {
                Some(original) => &original.0,
                None => request.uri(),
            };
            Some((self.compiled(template)?, uri.path()))
        }

        fn compiled(&self, template: &str) -> Option<Arc<Routes>> {
            let cached = self.compiled.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(routes) = cached.get(template) {
                return Some(Arc::clone(routes));
            }
            drop(cached);
            let mut router = matchit::Router::new();
            if let Err(error) = router.insert(template, ()) {
                tracing::debug!(template, %error, "axum's matched route does not compile");
                return None;
            }
            let routes = Arc::new(Routes { router });
            let mut compiled = self
                .compiled
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            if compiled.len() < Self::CAPACITY {
                compiled.insert(template.into(), Arc::clone(&routes));
            }
            Some(routes)
        }
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
