//! Route templates in axum's syntax, matched with `matchit` as axum matches them: which
//! requests a layer locks, and their path parameters; or, with the `axum` feature, the
//! parameters axum parsed for the route it matched.

use std::borrow::Cow;

use crate::error::BuildError;
use crate::key::head::decode;
use crate::key::{KeyError, KeySpec};

/// The path parameters of a matched route: names from the template, values
/// percent-decoded (borrowed from the path unless decoding changed them).
pub(crate) type Params<'a> = Vec<(&'a str, Cow<'a, str>)>;

/// The route templates of a layer, compiled into one router.
pub(crate) struct Routes {
    router: matchit::Router<()>,
}

impl Routes {
    /// Compiles `templates`; each must define the parameters of the key's path placeholders
    /// (`<id>`, `<path.id>`).
    pub(crate) fn new(templates: &[String], key: &KeySpec) -> Result<Self, BuildError> {
        let mut router = matchit::Router::new();
        for route in templates {
            let params = route_params(route);
            if let Some((placeholder, param)) = key.path_params().find(|(_, p)| !params.contains(p))
            {
                return Err(BuildError::MissingPathParam {
                    route: route.clone(),
                    param: param.to_owned(),
                    placeholder: placeholder.to_owned(),
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
pub(crate) mod axum_route {
    //! The route axum matched, for layers without routes of their own.

    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use axum::extract::rejection::RawPathParamsRejection;
    use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
    use http::request::Parts;

    /// What axum says of the request's route.
    pub(crate) enum Matched {
        /// axum matched no route before this layer: the layer runs outside axum's `Router`
        /// (or on its fallback), so there are no path parameters.
        None,
        /// The matched route's parameters, percent-decoded (a nested router's include the
        /// prefix's).
        Params(RawPathParams),
        /// A parameter is not UTF-8 once percent-decoded.
        InvalidUtf8,
    }

    /// axum's own parsed parameters (`RawPathParams`), as a handler would extract them.
    pub(crate) fn matched(parts: &mut Parts) -> Matched {
        // The fallback has parameters but no matched route: it is not a route of the app.
        if parts.extensions.get::<MatchedPath>().is_none() {
            return Matched::None;
        }
        // The extractor only reads the request's extensions: it is ready at the first poll.
        let mut extract = pin!(RawPathParams::from_request_parts(parts, &()));
        match extract
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(Ok(params)) => Matched::Params(params),
            Poll::Ready(Err(RawPathParamsRejection::InvalidUtf8InPathParam(_))) => {
                Matched::InvalidUtf8
            }
            Poll::Ready(Err(_)) | Poll::Pending => Matched::None,
        }
    }

    /// The route axum matched, for logs.
    pub(crate) fn template(parts: &Parts) -> Option<&str> {
        parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str)
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
        let key = KeySpec::template("item_<id:str>", Vec::new()).unwrap();
        let routes = Routes::new(&["/items/{id}/buy".to_owned()], &key).unwrap();
        let params = routes.at("/items/a%20b/buy").unwrap().unwrap();
        assert_eq!(params, [("id", Cow::Borrowed("a b"))]);
        assert!(routes.at("/other").is_none());
        let bad = routes.at("/items/%FF/buy").unwrap().unwrap_err();
        assert_eq!(bad.parameter(), "id");
    }
}
