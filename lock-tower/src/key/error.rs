//! [`KeyError`]: why no lock name could be made for a request.

use std::borrow::Cow;

/// Why no lock name could be made for a request. The request is answered `400 Bad Request`
/// (`INVALID_ARGUMENT` for gRPC) and no lock is attempted. The answer names the parameter,
/// unless the layer's configuration is at fault (see
/// [`is_misconfiguration`](Self::is_misconfiguration)): then `500`, generic.
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

    /// The same error, named after the placeholder as written in the template (a lookup
    /// reports the bare name it looked up).
    pub(crate) fn for_parameter(self, written: &str) -> Self {
        Self {
            parameter: written.to_owned(),
            ..self
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
    /// reaches. The client is answered a generic `500 Internal Server Error` (`INTERNAL`);
    /// the details are logged at `error` each time, and written once to stderr.
    pub fn is_misconfiguration(&self) -> bool {
        self.misconfigured
    }
}
