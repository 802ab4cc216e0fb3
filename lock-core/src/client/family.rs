//! The lock family's requests: read-write locks, semaphores and multi-locks. The exclusive
//! lock's [`LockClient::lock`] is in [`handle`](crate::client::handle); these are the
//! client's other ways to hold a name.

use std::sync::Arc;

use crate::client::handle::LockClient;
use crate::lock::multi::MultiLockRequest;
use crate::lock::request::LockRequest;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::name::LockName;

impl LockClient {
    /// Starts a request for the read side of the read-write lock `name`: held beside other
    /// readers, never beside a writer. Once a writer waits, new readers queue behind it, so
    /// a stream of readers cannot starve writers. It is Redisson's `RReadWriteLock` layout,
    /// so Redisson's read and write locks of the same key exclude distlock's and the other
    /// way round.
    ///
    /// The request is a [`LockRequest`] like any other: `.await`, `try_acquire`, `run`,
    /// leases, the watchdog, fencing tokens, `lost()`. In one [`scope`](crate::scope), a
    /// reader re-enters a read lock the scope holds, or the write lock it holds (the write
    /// lock covers reading); asking for the write lock while holding only the read lock is
    /// [`LockError::InvalidRequest`](crate::LockError::InvalidRequest) (an upgrade would wait for itself).
    ///
    /// A read-write lock needs one Redis (a server, Sentinel or a Cluster): under Redlock
    /// the acquisition is [`LockError::InvalidRequest`](crate::LockError::InvalidRequest).
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
    /// let reading = client.read_lock("catalog").await?;
    /// let also_reading = client.read_lock("catalog").await?; // another owner, at once
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, name: impl Into<LockName>) -> LockRequest {
        self.request(name.into(), LockMode::Read)
    }

    /// Starts a request for the write side of the read-write lock `name`: held alone, with
    /// no reader and no other writer; see [`read_lock`](Self::read_lock). Its fencing token
    /// is above every token issued before for the name, to readers and writers alike.
    pub fn write_lock(&self, name: impl Into<LockName>) -> LockRequest {
        self.request(name.into(), LockMode::Write)
    }

    /// Starts a request for one permit of the semaphore `name`, of which at most `permits`
    /// are held at once across every client: "at most 3 exports per tenant".
    ///
    /// Each permit is a hold with a lease, renewed by the watchdog and given back by itself
    /// when its holder dies; waiters are woken by the release and served in arrival order.
    /// The request is a [`LockRequest`]: `.await` it for the permit's [`LockGuard`](crate::LockGuard).
    ///
    /// **Capacity rule**: the limit is the caller's. A permit is granted while fewer than
    /// the requesting caller's own `permits` are held, so callers naming one semaphore with
    /// 3 and 5 (say, during a rolling deploy) never hold more than 5 together, and the
    /// caller of 3 waits while 3 or more are held. `permits` of 0 is
    /// [`LockError::InvalidRequest`](crate::LockError::InvalidRequest).
    ///
    /// A semaphore needs one Redis (a server, Sentinel or a Cluster): under Redlock the
    /// acquisition is [`LockError::InvalidRequest`](crate::LockError::InvalidRequest).
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
    /// let permit = client.semaphore("export_tenant_9", 3).await?;
    /// // … at most 3 of these run at once, across every instance …
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<LockName>, permits: u32) -> LockRequest {
        self.request(name.into(), LockMode::Permit).permits(permits)
    }

    /// Starts a request for several locks at once, all or nothing: a transfer locks both
    /// accounts. The names are taken in one global order (that of their Redis keys)
    /// whatever order they are given in, so two callers naming {a, b} and {b, a} cannot
    /// deadlock; if one cannot be taken within the wait, those taken are released. Each
    /// name is an ordinary exclusive lock: single locks of the same names exclude it, a
    /// scope holding one re-enters it, and the guard has one fencing token per name. It
    /// works on every topology, Redlock included.
    ///
    /// ```no_run
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), lock_core::LockError> {
    /// let both = client.lock_all(["acct_17", "acct_4"]).await?;
    /// let token = both.fencing_token("acct_4").expect("one of the names");
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I, N>(&self, names: I) -> MultiLockRequest
    where
        I: IntoIterator<Item = N>,
        N: Into<LockName>,
    {
        let (engine, holds) = (Arc::clone(&self.engine), Arc::clone(&self.holds));
        MultiLockRequest::new(engine, holds, names.into_iter().map(Into::into).collect())
    }
}
