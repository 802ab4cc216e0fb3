//! One cell of the matrix: a kind of hold meeting one option on one topology.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{wait_until, GENEROUS};
use distlock_tests::metrics::{counter, counters, gauge};
use lock_core::idempotency::Outcome;
use lock_core::{LockClient, LockError, OnLost};

use crate::hold::{Hold, Req};
use crate::kind::Kind;
use crate::refusal::Refusal;
use crate::{Clients, Opt};

pub(crate) struct Cell {
    clients: Arc<Clients>,
    kind: Kind,
    opt: Opt,
    name: String,
}

impl Cell {
    pub(crate) fn new(clients: Arc<Clients>, kind: Kind, opt: Opt) -> Self {
        let name = format!("mx_{}_{kind:?}_{opt:?}", clients.topology).to_lowercase();
        Self {
            clients,
            kind,
            opt,
            name,
        }
    }

    pub(crate) fn label(&self) -> String {
        format!(
            "{:?} × {:?} on {}",
            self.kind, self.opt, self.clients.topology
        )
    }

    pub(crate) fn client(&self) -> &LockClient {
        &self.clients.plain
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn req(&self) -> Req {
        self.kind.request(self.client(), &self.name)
    }

    fn names(&self) -> Vec<String> {
        self.kind.names(&self.name)
    }

    /// True when Redis says every name of the cell is held.
    async fn held_in_redis(&self) -> Result<bool, LockError> {
        held(self.client(), &self.names()).await
    }

    pub(crate) async fn wait_held_in_redis(&self, held: bool) {
        wait_until("the hold as expected in Redis", GENEROUS, || async {
            self.held_in_redis().await.expect("inspect") == held
        })
        .await;
    }

    /// Force-releases every name of the cell; the first must have been held. The others
    /// may already be free: the holder hears the first revocation at once, and a holder
    /// that aborts releases the rest of its names itself.
    async fn force_release_all(&self) -> Result<(), LockError> {
        for (i, name) in self.names().into_iter().enumerate() {
            let was_held = self.client().force_release(name.as_str()).await?;
            assert!(was_held || i > 0, "{name} was held");
        }
        Ok(())
    }

    /// Asserts that a second request of the kind does not get the hold now. An election
    /// has no single attempt: a rival campaign queues behind the term instead.
    async fn assert_excluded(&self) -> Result<(), Refusal> {
        if self.kind.has_try() {
            assert!(self.req().try_acquire().await?.is_none(), "not excluded");
            return Ok(());
        }
        let rival = tokio::spawn(self.req().acquire());
        wait_until("a rival queued behind the hold", GENEROUS, || async {
            let state = self.client().inspect(self.name.as_str()).await;
            state.expect("inspect").waiters() > 0
        })
        .await;
        assert!(!rival.is_finished(), "the rival took a held election");
        // Dropping a campaign leaves no term held.
        rival.abort();
        Ok(())
    }

    /// Takes the hold of a name known to be free: one attempt where the kind has one.
    async fn take_free(&self) -> Result<Hold, Refusal> {
        if self.kind.has_try() {
            Ok(self.req().try_acquire().await?.expect("free"))
        } else {
            self.req().acquire().await
        }
    }

    /// Runs the cell: `Ok` when it worked (its assertions passed), else what it met.
    pub(crate) async fn run(self) -> Result<(), Refusal> {
        match self.opt {
            Opt::Wait => self.wait().await,
            Opt::TryAcquire => self.try_acquire().await,
            Opt::Lease => self.lease().await,
            Opt::Watchdog => self.watchdog().await,
            Opt::RequireReplicas => self.require_replicas().await,
            Opt::RequestId => self.request_id().await,
            Opt::OnLost => self.on_lost().await,
            Opt::Run => self.run_under().await,
            Opt::Extend => self.extend().await,
            Opt::Reentry => self.reentry().await,
            Opt::Metrics => self.metrics().await,
            Opt::ForceRelease => self.force_release().await,
            Opt::Inspect => self.inspect().await,
            Opt::GuardedWrite => self.guarded_write().await,
            Opt::Macro => self.macro_form().await,
            Opt::Layer => crate::layer::layer_form(&self).await,
        }
    }

    /// A waiter gets the hold once the holder releases it, and then excludes others.
    async fn wait(&self) -> Result<(), Refusal> {
        let first = self.req().acquire().await?;
        let waiter = tokio::spawn(self.req().wait(GENEROUS).acquire());
        first.release().await?;
        let mut second = waiter.await.expect("no panic")?;
        assert!(second.is_held());
        if self.kind.exclusive() {
            self.assert_excluded().await?;
        }
        second.release().await
    }

    /// One attempt: busy while held (readers share), free after the release.
    async fn try_acquire(&self) -> Result<(), Refusal> {
        let first = self.req().acquire().await?;
        let second = self.req().try_acquire().await?;
        assert_eq!(second.is_some(), !self.kind.exclusive());
        if let Some(second) = second {
            second.release().await?;
        }
        first.release().await?;
        let again = self.req().try_acquire().await?.expect("free after release");
        again.release().await
    }

    /// An explicit lease is not renewed: the hold expires by itself, and its holder learns
    /// of it.
    async fn lease(&self) -> Result<(), Refusal> {
        let mut hold = self
            .req()
            .lease(self.clients.leases.short)
            .acquire()
            .await?;
        wait_until(
            "the lease ran out",
            self.clients.leases.short + GENEROUS,
            || async { !self.held_in_redis().await.expect("inspect") },
        )
        .await;
        tokio::time::timeout(GENEROUS, hold.lost())
            .await
            .expect("the holder learns that its lease ran out");
        assert!(!hold.is_held(), "the guard outlived its lease");
        // Waits (bounded) rather than tries once: under Redlock a slow node may miss one try.
        let next = self.req().wait(GENEROUS).acquire().await?;
        next.release().await
    }

    /// The shortest remaining lease Redis shows among the cell's names.
    async fn remaining(&self) -> Result<Duration, LockError> {
        let mut least = Duration::MAX;
        for name in self.names() {
            let state = self.client().inspect(name.as_str()).await?;
            least = least.min(state.remaining_ttl().expect("held with a lease"));
        }
        Ok(least)
    }

    /// The watchdog renews the client's lease: Redis shows the remaining lease raised again
    /// (a renewal, every 250 ms here), and the hold is still held.
    async fn watchdog(&self) -> Result<(), Refusal> {
        let mut hold = self.req().acquire().await?;
        // The lowest reading so far: a renewal shows as a later reading above it.
        let least = std::sync::Mutex::new(self.remaining().await?);
        wait_until("a renewal raised the lease", GENEROUS, || async {
            let now = self.remaining().await.expect("inspect");
            let mut least = least.lock().unwrap();
            let renewed = now > *least;
            *least = (*least).min(now);
            renewed
        })
        .await;
        assert!(hold.is_held() && self.held_in_redis().await?, "not renewed");
        if self.kind.exclusive() {
            self.assert_excluded().await?;
        }
        hold.release().await
    }

    /// A client waiting for a replica's acknowledgement acquires every kind.
    async fn require_replicas(&self) -> Result<(), Refusal> {
        let client = (self.clients.replicated)()?;
        let mut hold = self.kind.request(&client, &self.name).acquire().await?;
        assert!(hold.is_held() && self.held_in_redis().await?);
        hold.release().await
    }

    /// The request id is in the holder record of every name.
    async fn request_id(&self) -> Result<(), Refusal> {
        let id = format!("rid-{}", self.name);
        let hold = self.req().request_id(&id).acquire().await?;
        for name in self.names() {
            let state = self.client().inspect(name.as_str()).await?;
            let recorded = state
                .holders()
                .iter()
                .filter_map(|h| h.holder()?.request_id())
                .chain(state.holder().and_then(|h| h.request_id()))
                .any(|r| r == id);
            assert!(recorded, "{name}: no request id in {state:?}");
        }
        hold.release().await
    }

    /// `Abort` drops the work when the hold is lost; `Continue` lets it finish.
    async fn on_lost(&self) -> Result<(), Refusal> {
        // A kind the topology refuses answers here, not inside the spawned work.
        self.req()
            .try_acquire()
            .await?
            .expect("free")
            .release()
            .await?;
        let work = self
            .req()
            .on_lost(OnLost::Abort)
            .run(std::future::pending::<()>());
        let aborted = tokio::spawn(work);
        self.wait_held_in_redis(true).await;
        self.force_release_all().await?;
        let answer = tokio::time::timeout(GENEROUS, aborted)
            .await
            .expect("the work was aborted")
            .expect("no panic");
        assert!(matches!(&answer, Err(e) if e.is_lost()), "{answer:?}");
        if !self.kind.continues_on_lost() {
            return Ok(());
        }
        let (finish, finished) = tokio::sync::oneshot::channel::<()>();
        let work = self
            .req()
            .on_lost(OnLost::Continue)
            .run(async move { finished.await.is_ok() });
        let running = tokio::spawn(work);
        self.wait_held_in_redis(true).await;
        self.force_release_all().await?;
        finish.send(()).expect("still running");
        let answer = tokio::time::timeout(GENEROUS, running)
            .await
            .expect("the work finished")
            .expect("no panic");
        assert!(matches!(answer, Ok(Outcome::Ran(true))), "{answer:?}");
        Ok(())
    }

    /// `run` runs the work under the hold and releases it after; a second run runs again,
    /// or replays the first's stored output (an idempotency key).
    async fn run_under(&self) -> Result<(), Refusal> {
        let (client, names) = (self.client().clone(), self.names());
        let work = async move { held(&client, &names).await.expect("inspect") };
        let first = self.req().run(work).await?;
        assert!(
            matches!(first, Outcome::Ran(true)),
            "the work ran without the hold: {first:?}"
        );
        // Redlock's release returns at the first node that released: the others follow.
        self.wait_held_in_redis(false).await;
        let again = self.req().run(async { false }).await?;
        if self.kind.replays() {
            assert!(matches!(again, Outcome::Replayed(true)), "{again:?}");
        } else {
            assert!(matches!(again, Outcome::Ran(false)), "{again:?}");
        }
        Ok(())
    }

    /// An extension raises an explicit lease: Redis shows more than the original left.
    async fn extend(&self) -> Result<(), Refusal> {
        let lease = self.clients.leases.client;
        let mut hold = self.req().lease(lease).acquire().await?;
        hold.extend(lease * 3).await?;
        // Redlock's extension returns once a majority extended: the last node follows.
        wait_until("the extension in Redis", GENEROUS, || async {
            self.remaining().await.expect("inspect") > lease
        })
        .await;
        assert!(hold.is_held());
        hold.release().await
    }

    /// The same request inside one scope re-enters the hold (same tokens); a second
    /// campaign in a scope that leads is refused (`InvalidRequest`).
    async fn reentry(&self) -> Result<(), Refusal> {
        lock_core::scope(async {
            let mut outer = self.req().acquire().await?;
            if !self.kind.reenters() {
                let again = self.req().acquire().await;
                let refused = matches!(again, Err(Refusal::Lock(LockError::InvalidRequest { .. })));
                assert!(refused, "a second campaign in the scope: {:?}", again.err());
                return outer.release().await;
            }
            let inner = self.req().acquire().await?;
            for name in self.names() {
                assert_eq!(outer.token(&name), inner.token(&name), "{name}");
            }
            inner.release().await?;
            assert!(outer.is_held() && self.held_in_redis().await?);
            outer.release().await
        })
        .await
    }

    /// Acquisitions and holds are counted under the request's label, or under the kind's
    /// own label for kinds with unbounded names (never the name itself).
    async fn metrics(&self) -> Result<(), Refusal> {
        let label = format!("template={}", self.kind.fixed_label().unwrap_or(&self.name));
        let hold = self
            .req()
            .metrics_label(self.name.clone())
            .acquire()
            .await?;
        let acquired = counter("distlock_acquisitions_total", &["outcome=acquired", &label]);
        assert!(acquired >= 1, "acquisitions: {acquired}");
        assert!(gauge("distlock_held", &[&label]) >= 1.0);
        if self.kind.fixed_label().is_some() {
            let named = format!("template={}", self.name);
            let series = counters("distlock_acquisitions_total");
            assert!(
                series.iter().all(|(labels, _)| !labels.contains(&named)),
                "the name is a label: {series:?}"
            );
        }
        hold.release().await
    }

    /// An operator's force-release frees every name, and the holder learns of it.
    async fn force_release(&self) -> Result<(), Refusal> {
        let mut hold = self.req().acquire().await?;
        self.force_release_all().await?;
        tokio::time::timeout(GENEROUS, hold.lost())
            .await
            .expect("the holder learns of the loss");
        assert!(!hold.is_held());
        let next = self.take_free().await?;
        next.release().await
    }

    /// `inspect` shows the kind, and the hold's token.
    async fn inspect(&self) -> Result<(), Refusal> {
        let hold = self.req().acquire().await?;
        for name in self.names() {
            let state = self.client().inspect(name.as_str()).await?;
            assert!(state.is_held());
            assert_eq!(state.mode(), Some(self.kind.mode()));
            let token = hold.token(&name);
            // Under Redlock each node grants its own token; inspect shows the highest.
            let redlock = self.clients.topology == "redlock";
            let shown = state.fencing_token() == token
                || state.holders().iter().any(|h| h.fencing_token() == token)
                || (redlock && state.fencing_token() >= token);
            assert!(shown, "{name}: token {token} not in {state:?}");
        }
        hold.release().await
    }

    /// A guarded write under the hold lands (its `INCR` answers 1); once an operator's force
    /// release has ended the hold, the same write is refused as lost and lands nothing (the
    /// next hold's `INCR` answers 2).
    async fn guarded_write(&self) -> Result<(), Refusal> {
        let mut hold = self.take_free().await?;
        let mut incr = redis::pipe();
        incr.cmd("INCR").arg(hold.key("n"));
        let written = hold.write::<(i64,)>(&incr).await;
        let Ok((n,)) = written else {
            // Refused before sending: the hold is still there to release.
            hold.release().await?;
            return written.map(drop);
        };
        assert_eq!(n, 1, "the write under the hold");
        self.force_release_all().await?;
        let stale = hold.write::<(i64,)>(&incr).await;
        assert!(
            matches!(&stale, Err(e) if e.is_lost()),
            "a write after the hold ended: {stale:?}"
        );
        let mut next = self.take_free().await?;
        let (n,): (i64,) = next.write(&incr).await?;
        assert_eq!(n, 2, "the write after the hold ended landed");
        next.release().await
    }

    /// `#[distributed_lock]` takes the kind: its body runs under the hold, released after.
    async fn macro_form(&self) -> Result<(), Refusal> {
        let (locks, name) = (self.client(), self.name.as_str());
        let held = match self.kind {
            Kind::Lock => crate::forms::lock(locks, name).await?,
            Kind::Read => crate::forms::read(locks, name).await?,
            Kind::Write => crate::forms::write(locks, name).await?,
            Kind::Semaphore => crate::forms::semaphore(locks, name).await?,
            Kind::LockAll => crate::forms::lock_all(locks, name).await?,
            Kind::Job => (crate::forms::job(locks, name).await?)
                .ran()
                .expect("the name was free: the job ran"),
            Kind::Election | Kind::Idempotency => {
                panic!("no macro form: the table lists this cell as not applicable")
            }
        };
        assert!(held, "the body ran without the hold");
        self.wait_held_in_redis(false).await;
        Ok(())
    }
}

/// True when Redis says every one of `names` is held.
pub(crate) async fn held(client: &LockClient, names: &[String]) -> Result<bool, LockError> {
    for name in names {
        if !client.inspect(name.as_str()).await?.is_held() {
            return Ok(false);
        }
    }
    Ok(true)
}
