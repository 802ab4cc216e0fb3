//! [`LockClient::idempotent`]: a future run once per idempotency key, its result stored
//! (JSON, through serde) and returned to every later duplicate.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::handle::LockClient;
use crate::idempotency::error::IdempotencyError;
use crate::idempotency::fingerprint::Fingerprint;
use crate::idempotency::{Begin, Idempotency};
use crate::observe;
use crate::protocol::name::LockName;

/// How an idempotent call got its result.
///
/// Available with the crate feature `serde`.
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome<T> {
    /// This call ran the work, and its result was stored.
    Ran(T),
    /// An earlier call with the key completed: its stored result.
    Replayed(T),
}

impl<T> Outcome<T> {
    /// The result, however it was got.
    pub fn into_inner(self) -> T {
        match self {
            Self::Ran(t) | Self::Replayed(t) => t,
        }
    }

    /// True for a stored result.
    pub fn is_replayed(&self) -> bool {
        matches!(self, Self::Replayed(_))
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl LockClient {
    /// Runs `work` at most once per completed `key` within the retention (24 h by
    /// default): the first call runs it under the key's in-flight lock (watchdog-renewed,
    /// fenced, aborted when lost) and stores its `Ok` result, atomically with the release,
    /// only while its hold is current; later calls with the same `fingerprint` get the
    /// stored result without running anything. `Err` results, a lost hold and a dropped
    /// call store nothing (a call dropped after its store was sent may still be stored):
    /// the key is free for a retry, which runs `work` again — so fence `work`'s effects with
    /// the key's token ([`current_lock`](crate::current_lock)). See SAFETY.md for what
    /// "once" means.
    ///
    /// ```no_run
    /// # #[derive(Debug)] enum PayError { Key(lock_core::idempotency::IdempotencyError) }
    /// # impl From<lock_core::idempotency::IdempotencyError> for PayError {
    /// #     fn from(e: lock_core::idempotency::IdempotencyError) -> Self { PayError::Key(e) } }
    /// # async fn charge(_: u64, _: u64) -> Result<String, PayError> { Ok(String::new()) }
    /// # async fn demo(client: lock_core::LockClient) -> Result<(), PayError> {
    /// let (job, cents) = (42_u64, 1999_u64);
    /// let receipt = client
    ///     .idempotent(format!("charge:{job}"), cents.to_be_bytes(), async move {
    ///         // Pass lock_core::current_lock()'s fencing token to the payment store.
    ///         charge(job, cents).await
    ///     })
    ///     .await?;
    /// println!("receipt {} (replayed: {})", receipt.clone().into_inner(), receipt.is_replayed());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `work`'s own errors, and [`IdempotencyError`] converted into `E`: another call in
    /// flight with the key ([`InFlight`](IdempotencyError::InFlight)), the key used with
    /// another fingerprint ([`Mismatch`](IdempotencyError::Mismatch)), the hold lost
    /// ([`Lost`](IdempotencyError::Lost)), a result that cannot be (de)serialised, Redis.
    ///
    /// # Cancel safety
    /// Dropping the future drops `work` and releases the key without storing anything
    /// (a store already sent may still complete: the result is then stored and replayed).
    ///
    /// Available with the crate feature `serde`.
    pub fn idempotent<F, T, E>(
        &self,
        key: impl Into<LockName>,
        fingerprint: impl Into<Fingerprint>,
        work: F,
    ) -> IdempotentRequest<F>
    where
        F: Future<Output = Result<T, E>>,
    {
        IdempotentRequest {
            idempotency: self.idempotency(key),
            fingerprint: fingerprint.into(),
            work,
        }
    }
}

/// A future run once per idempotency key: made by [`LockClient::idempotent`]; set the
/// retention or lease, then `.await` it.
///
/// Available with the crate feature `serde`.
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[must_use = "futures do nothing unless awaited"]
pub struct IdempotentRequest<F> {
    idempotency: Idempotency,
    fingerprint: Fingerprint,
    work: F,
}

impl<F> IdempotentRequest<F> {
    /// How long the result is kept for duplicates ([`DEFAULT_RETENTION`](crate::idempotency::DEFAULT_RETENTION), 24 h, by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.idempotency = self.idempotency.retention(retention);
        self
    }

    /// The in-flight lock's lease (by default the watchdog renews it while `work` runs).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.idempotency = self.idempotency.lease(lease);
        self
    }
}

impl<F: fmt::Debug> fmt::Debug for IdempotentRequest<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotentRequest")
            .field("idempotency", &self.idempotency)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl<F, T, E> IntoFuture for IdempotentRequest<F>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: Serialize + DeserializeOwned + Send + 'static,
    E: From<IdempotencyError> + Send + 'static,
{
    type Output = Result<Outcome<T>, E>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(run(self))
    }
}

async fn run<F, T, E>(request: IdempotentRequest<F>) -> Result<Outcome<T>, E>
where
    F: Future<Output = Result<T, E>>,
    T: Serialize + DeserializeOwned,
    E: From<IdempotencyError>,
{
    let IdempotentRequest {
        idempotency,
        fingerprint,
        work,
    } = request;
    let key = idempotency.key().clone();
    let codec = |action, source: serde_json::Error| IdempotencyError::Codec {
        key: key.clone(),
        action,
        source: source.into(),
    };
    let in_flight = match idempotency.begin(&fingerprint).await? {
        Begin::Replay(stored) => {
            let value = serde_json::from_slice(stored.payload()).map_err(|e| codec("decode", e))?;
            return Ok(Outcome::Replayed(value));
        }
        Begin::Run(in_flight) => in_flight,
    };
    let info = in_flight.guard().info();
    let lost = in_flight.lost();
    let work = crate::lock::current_lock::with_lock_info(info, work);
    let output = tokio::select! {
        biased;
        output = work => output,
        () = lost => Err(IdempotencyError::Lost { key: key.clone() }.into()),
    };
    let value = match output {
        Ok(value) => value,
        Err(error) => {
            // Released before the caller hears of it: its retry finds the key free.
            let names = in_flight.guard().held().engine.config.trace_names;
            match in_flight.release().await {
                // The client's health logs an outage once, not once per request.
                Err(release) if release.is_unavailable() => {
                    tracing::debug!(
                        distlock.error.class = release.class(),
                        error = observe::error(&release, names),
                        "releasing an idempotency key failed"
                    );
                }
                Err(release) => tracing::warn!(
                    distlock.error.class = release.class(),
                    error = observe::error(&release, names),
                    "releasing an idempotency key failed"
                ),
                Ok(()) => {}
            }
            return Err(error);
        }
    };
    let payload = serde_json::to_vec(&value).map_err(|e| codec("encode", e))?;
    in_flight.complete(&payload).await?;
    Ok(Outcome::Ran(value))
}
