//! [`IdempotencyLayer`] and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderName, Method, StatusCode};
use lock_core::idempotency::{Fingerprint, DEFAULT_RETENTION};
use lock_core::LockClient;
use tower_layer::Layer;

use crate::idempotency::config::{CallerFn, Config, FingerprintFn};
use crate::idempotency::service::Idempotent;

/// A tower layer that runs each request with an `Idempotency-Key` once, stores its
/// response, and replays it to later duplicates; see the [module docs](crate::idempotency).
///
/// ```no_run
/// # fn demo(client: lock_core::LockClient) {
/// use lock_tower::idempotency::IdempotencyLayer;
/// let layer = IdempotencyLayer::builder(client)
///     .require_key()
///     .caller(|req| Some(req.headers.get("x-tenant")?.to_str().ok()?.to_owned()))
///     .build();
/// # let _ = layer; }
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    config: Arc<Config>,
}

impl IdempotencyLayer {
    /// A layer with every setting at its default (see [`IdempotencyLayerBuilder`]).
    pub fn new(client: LockClient) -> Self {
        Self::builder(client).build()
    }

    /// A builder, starting from the defaults.
    pub fn builder(client: LockClient) -> IdempotencyLayerBuilder {
        IdempotencyLayerBuilder {
            config: Config {
                client,
                methods: vec![Method::POST, Method::PATCH],
                header: HeaderName::from_static(IdempotencyLayerBuilder::HEADER),
                required: false,
                namespace: IdempotencyLayerBuilder::NAMESPACE.to_owned(),
                caller: None,
                fingerprint: Arc::new(default_fingerprint),
                max_key_len: IdempotencyLayerBuilder::MAX_KEY_LEN,
                max_request: IdempotencyLayerBuilder::MAX_REQUEST,
                max_response: IdempotencyLayerBuilder::MAX_RESPONSE,
                retention: DEFAULT_RETENTION,
                lease: None,
                keep_headers: vec![http::header::CONTENT_TYPE],
                too_large: StatusCode::CONFLICT,
                holds: Default::default(),
            },
            custom_methods: false,
        }
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotent<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotent::from_config(inner, Arc::clone(&self.config))
    }
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("config", &self.config)
            .finish()
    }
}

/// The method, the path with its query, and the body.
fn default_fingerprint(parts: &Parts, body: &Bytes) -> Fingerprint {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    Fingerprint::builder()
        .part(parts.method.as_str())
        .part(path)
        .part(body)
        .finish()
}

/// Settings of an [`IdempotencyLayer`].
pub struct IdempotencyLayerBuilder {
    config: Config,
    custom_methods: bool,
}

impl IdempotencyLayerBuilder {
    /// The header (gRPC: metadata key) that carries the key, by default.
    pub const HEADER: &'static str = "idempotency-key";
    /// The first part of the in-flight lock names, by default.
    pub const NAMESPACE: &'static str = "idempotency";
    /// The longest key accepted, by default (in bytes, visible ASCII).
    pub const MAX_KEY_LEN: usize = 255;
    /// The largest request body read to fingerprint it, by default (1 MiB); larger ones are
    /// answered `413` / `RESOURCE_EXHAUSTED`.
    pub const MAX_REQUEST: usize = 1 << 20;
    /// The largest response body stored, by default (1 MiB).
    pub const MAX_RESPONSE: usize = 1 << 20;

    /// Adds a method whose requests are idempotent; the first call replaces the default
    /// (`POST` and `PATCH`). Other methods pass through.
    pub fn method(mut self, method: Method) -> Self {
        if !self.custom_methods {
            self.config.methods.clear();
            self.custom_methods = true;
        }
        if !self.config.methods.contains(&method) {
            self.config.methods.push(method);
        }
        self
    }

    /// The header that carries the key (`idempotency-key` by default).
    pub fn header(mut self, header: HeaderName) -> Self {
        self.config.header = header;
        self
    }

    /// Refuses requests of the layer's methods without a key (`400` /
    /// `INVALID_ARGUMENT`); by default they pass through, unprotected.
    pub fn require_key(mut self) -> Self {
        self.config.required = true;
        self
    }

    /// Scopes keys to their caller: `f` names the caller of a request (the authenticated
    /// principal an earlier layer stored in the extensions, a tenant header, …), so two
    /// callers' equal keys never meet. A request `f` answers `None` for is refused (`400` /
    /// `INVALID_ARGUMENT`). Without it, every caller shares one space of keys.
    pub fn caller<F>(mut self, f: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.config.caller = Some(Arc::new(f) as CallerFn);
        self
    }

    /// What identifies a request for its key (by default the method, the path with its
    /// query, and the body): the same key with another fingerprint is answered `422` /
    /// `FAILED_PRECONDITION`.
    pub fn fingerprint<F>(mut self, f: F) -> Self
    where
        F: Fn(&Parts, &Bytes) -> Fingerprint + Send + Sync + 'static,
    {
        self.config.fingerprint = Arc::new(f) as FingerprintFn;
        self
    }

    /// The first part of the in-flight lock names (`idempotency` by default): layers of
    /// different services that share a Redis keep their keys apart with it.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.namespace = namespace.into();
        self
    }

    /// The longest key accepted ([`MAX_KEY_LEN`](Self::MAX_KEY_LEN) by default).
    pub fn max_key_len(mut self, len: usize) -> Self {
        self.config.max_key_len = len;
        self
    }

    /// The largest request body read ([`MAX_REQUEST`](Self::MAX_REQUEST) by default).
    pub fn max_request_body(mut self, bytes: usize) -> Self {
        self.config.max_request = bytes;
        self
    }

    /// The largest response body stored ([`MAX_RESPONSE`](Self::MAX_RESPONSE) by
    /// default). A larger response goes to its client, and its key is then answered
    /// [`too_large_status`](Self::too_large_status).
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.config.max_response = bytes;
        self
    }

    /// What a duplicate of a request whose response was too large to store is answered
    /// (HTTP; gRPC answers `ALREADY_EXISTS`): `409 Conflict` by default, without
    /// `Retry-After`.
    pub fn too_large_status(mut self, status: StatusCode) -> Self {
        self.config.too_large = status;
        self
    }

    /// How long a completed response is kept (24 h by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.config.retention = retention;
        self
    }

    /// The in-flight lock's lease; by default the watchdog renews it while the request runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = Some(lease);
        self
    }

    /// A response header stored and replayed besides `content-type` (gRPC also keeps its
    /// status headers and trailers).
    pub fn keep_header(mut self, header: HeaderName) -> Self {
        if !self.config.keep_headers.contains(&header) {
            self.config.keep_headers.push(header);
        }
        self
    }

    /// The layer.
    pub fn build(self) -> IdempotencyLayer {
        IdempotencyLayer {
            config: Arc::new(self.config),
        }
    }
}

impl fmt::Debug for IdempotencyLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayerBuilder")
            .field("config", &self.config)
            .finish()
    }
}
