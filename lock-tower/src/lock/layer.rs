//! [`DistributedLockLayer`]: the layer, made by its [builder](crate::lock::LockLayerBuilder).

use std::fmt;
use std::sync::Arc;

use lock_core::LockClient;
use tower_layer::Layer;

use crate::error::BuildError;
use crate::lock::builder::LockLayerBuilder;
use crate::lock::config::Config;
use crate::lock::service::DistributedLock;

/// A tower [`Layer`] that takes one distributed lock per request; see the
/// [module docs](crate::lock). Cheap to clone.
///
/// ```no_run
/// # fn demo(client: lock_core::LockClient) -> Result<(), lock_tower::BuildError> {
/// use lock_tower::lock::DistributedLockLayer;
/// // One lock per item; `<id:u64>` is the route's `{id}` parameter, read as a `u64`.
/// let layer = DistributedLockLayer::builder(client)
///     .route("/items/{id}/buy")
///     .key("item_<id:u64>")
///     .build()?;
/// # let _ = layer; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedLockLayer {
    pub(crate) config: Arc<Config>,
}

impl DistributedLockLayer {
    /// A layer locking every request on the name rendered from `key` (see
    /// [`LockLayerBuilder::key`]), with every other setting at its default.
    ///
    /// # Errors
    /// As [`LockLayerBuilder::build`].
    pub fn new(client: LockClient, key: impl Into<String>) -> Result<Self, BuildError> {
        Self::builder(client).key(key).build()
    }

    /// A builder for a layer taking its locks through `client`.
    pub fn builder(client: LockClient) -> LockLayerBuilder {
        LockLayerBuilder::new(client)
    }
}

impl<S> Layer<S> for DistributedLockLayer {
    type Service = DistributedLock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DistributedLock::from_config(inner, Arc::clone(&self.config))
    }
}

impl fmt::Debug for DistributedLockLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedLockLayer")
            .field("config", &self.config)
            .finish()
    }
}
