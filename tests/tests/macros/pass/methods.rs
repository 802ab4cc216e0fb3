//! Inherent and trait-impl methods with every receiver, keys from `self` fields, `client = …`.
use std::sync::Arc;

use lock_core::{distributed_lock, LockClient, LockError};

struct Service {
    tenant: String,
    locks: LockClient,
    calls: u64,
}

impl Service {
    #[distributed_lock(key = "tenant_<self.tenant>:<id>", client = self.locks)]
    async fn by_ref(&self, id: u64) -> Result<String, LockError> {
        Ok(format!("{}{id}", self.tenant))
    }

    #[distributed_lock(key = "tenant_<self.tenant>", client = self.locks.clone())]
    async fn by_mut(&mut self) -> Result<u64, LockError> {
        self.calls += 1;
        Ok(self.calls)
    }

    #[distributed_lock(key = "tenant_<self.tenant>", client = &self.locks)]
    async fn by_value(self) -> Result<Self, LockError> {
        Ok(self)
    }

    #[distributed_lock(key = "tenant_<self.tenant>", client = self.locks)]
    async fn by_arc(self: Arc<Self>) -> Result<Arc<Self>, LockError> {
        let this = Arc::clone(&self);
        Ok(this)
    }

    #[distributed_lock(key = "other_<id>")]
    async fn default_client(&self, id: u64) -> Result<Self, LockError> {
        Ok(Self {
            tenant: id.to_string(),
            locks: self.locks.clone(),
            calls: self.calls,
        })
    }
}

trait Shop {
    fn sell(&self, id: u64) -> impl std::future::Future<Output = Result<u64, LockError>> + Send;
    async fn restock(&mut self, id: u64) -> Result<u64, LockError>;
}

impl Shop for Service {
    #[distributed_lock(key = "sell_<id>", client = self.locks)]
    async fn sell(&self, id: u64) -> Result<u64, LockError> {
        Ok(id)
    }

    #[distributed_lock(key = "restock_<self.tenant>:<id>", client = self.locks)]
    async fn restock(&mut self, id: u64) -> Result<u64, LockError> {
        self.calls += id;
        Ok(self.calls)
    }
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {}
