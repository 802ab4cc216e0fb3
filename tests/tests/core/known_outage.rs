//! Every path that calls Redis fails fast while the client knows Redis is down: the lock
//! kinds, multi-locks, jobs, elections, the operator's tools, idempotency keys and guarded
//! writes are refused at once (`Unavailable`, no round trip), as the lock path is, instead of
//! each waiting its command timeout.

use std::error::Error;
use std::time::Duration;

use distlock_tests::locks::builder;
use distlock_tests::outage::{is_refused_at_once, make_outage_known};
use distlock_tests::{RedisServer, TcpProxy};
use futures_util::future::{join_all, BoxFuture};
use futures_util::FutureExt as _;
use lock_core::election::Leadership;
use lock_core::idempotency::Fingerprint;
use lock_core::{LockClient, LockGuard};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Long, so that a call that waits for Redis is told apart from one refused at once.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

type Answer = Result<(), Box<dyn Error + Send + Sync>>;

/// A client, and what some paths need held before the outage: a lock to write under and,
/// for each copy of the calls, an election's term to proclaim in.
struct Paths {
    locks: LockClient,
    guard: LockGuard,
    terms: [Mutex<Leadership>; 2],
}

impl Paths {
    /// A client through `proxy`, its names under `prefix`.
    async fn new(proxy: &TcpProxy, prefix: &str) -> Self {
        let builder = builder(&proxy.url()).command_timeout(COMMAND_TIMEOUT);
        let builder = builder.key_prefix(prefix);
        let locks = builder.connect_timeout(COMMAND_TIMEOUT).build().unwrap();
        let guard = locks.lock("written").await.unwrap();
        let term = |name: &'static str| {
            let election = locks.election(name);
            async move { Mutex::new(election.campaign().await.unwrap()) }
        };
        let terms = [term("elected-0").await, term("elected-1").await];
        Self {
            locks,
            guard,
            terms,
        }
    }

    /// One call of each path, named (`copy` 0 or 1: the term it proclaims in).
    fn calls(&self, copy: usize) -> Vec<(&'static str, BoxFuture<'_, Answer>)> {
        let l = &self.locks;
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(self.guard.key("data")).arg(1).ignore();
        vec![
            (
                "inspect",
                async {
                    drop(l.inspect("x").await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "list",
                async {
                    drop(l.list("").await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "force release",
                async {
                    l.force_release("x").await?;
                    ok()
                }
                .boxed(),
            ),
            (
                "load functions",
                async {
                    l.load_functions().await?;
                    ok()
                }
                .boxed(),
            ),
            (
                "read lock",
                async {
                    drop(l.read_lock("x").await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "semaphore",
                async {
                    drop(l.semaphore("s", 2).await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "multi-lock",
                async {
                    drop(l.lock_all(["m1", "m2"]).await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "job",
                async {
                    drop(l.job("j").run(async {}).await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "leader read",
                async {
                    drop(l.election("e").leader().await?);
                    ok()
                }
                .boxed(),
            ),
            (
                "proclaim",
                async move {
                    let mut term = self.terms[copy].lock().await;
                    term.proclaim(Some("v".into())).await?;
                    ok()
                }
                .boxed(),
            ),
            (
                "guarded write",
                async move {
                    self.guard.write::<()>(&pipe).await?;
                    ok()
                }
                .boxed(),
            ),
            (
                "idempotency",
                async {
                    drop(l.idempotency("i").begin(&Fingerprint::of("r")).await?);
                    ok()
                }
                .boxed(),
            ),
        ]
    }
}

fn ok() -> Answer {
    Ok(())
}

/// Runs `calls` together: each one's name, answer and how long it took.
async fn timed(
    calls: Vec<(&'static str, BoxFuture<'_, Answer>)>,
) -> Vec<(&'static str, Answer, Duration)> {
    join_all(calls.into_iter().map(|(name, call)| async move {
        let started = Instant::now();
        let answer = call.await;
        (name, answer, started.elapsed())
    }))
    .await
}

/// True for an answer refused without a round trip, well within the command timeout.
fn at_once(answer: &Answer, took: Duration) -> bool {
    let refused = answer.as_ref().is_err_and(|e| is_refused_at_once(&**e));
    refused && took < COMMAND_TIMEOUT / 2
}

/// Once the client knows Redis is down, each path is refused at once. Every path is sent
/// twice in one batch: at most one call of the batch (the client's probe, one a second) goes
/// to Redis and waits, so each path shows an answer at once, and a path that did not fail
/// fast would show two waits. Control: a client that has not seen the outage sends the same
/// calls into the same black hole, and each waits the command timeout — so a path that did
/// not fail fast would fail this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_is_refused_at_once_and_the_control_waits_the_timeout() {
    let server = RedisServer::start();
    // The control's client has a proxy of its own, so its connection lives on into the black
    // hole (it never sees the outage being learnt).
    let (proxy, control_proxy) = (
        TcpProxy::start(server.addr()),
        TcpProxy::start(server.addr()),
    );
    let (knows, control) = (
        Paths::new(&proxy, "knows:").await,
        Paths::new(&control_proxy, "control:").await,
    );
    make_outage_known(&knows.locks, &proxy).await;
    proxy.refuse(false);
    proxy.blackhole(true);
    control_proxy.blackhole(true);
    let control_calls = timed(control.calls(0));
    let twice = knows.calls(0).into_iter().chain(knows.calls(1));
    let (control_answers, answers) = tokio::join!(control_calls, timed(twice.collect()));
    let slow: Vec<_> = answers.iter().filter(|(_, a, t)| !at_once(a, *t)).collect();
    assert!(slow.len() <= 1, "not refused at once: {slow:?}");
    assert!(!knows.locks.is_reachable());
    for (name, answer, took) in &control_answers {
        let error = answer.as_ref().expect_err(name);
        assert!(
            !is_refused_at_once(&**error) && *took >= COMMAND_TIMEOUT,
            "the control's {name} did not wait for Redis ({took:?}, {error}): the test could not tell"
        );
    }
}
