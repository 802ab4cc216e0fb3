//! No span or event of the library names a lock unless the client opted in
//! (`trace_lock_names(true)`): every field of every span and event of lock-core and
//! lock-tower, at TRACE, captured while scenarios of the suite run — acquisitions (waits,
//! hand-overs, re-entries, timeouts, renewals), an operator's force release and the loss it
//! causes, jobs (run and skipped), an election, the lock layer over axum (a busy request),
//! the idempotency layer (a key in flight, a key reused), and a Redis outage (renewals,
//! acquisitions, a release and the layer's fail-open during it). Every lock name and
//! idempotency key carries [`MARK`]; no template does.
//!
//! The control runs the same scenarios with a client that opted in: the same capture then
//! finds the mark in each of the events checked, so the first test is not blind.
//!
//! The capture is this test's thread's default subscriber (a current-thread runtime, so the
//! client's background tasks run on it too); the binary's global one is `spans.rs`'s.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use distlock_tests::locks::{builder, queue_key, queued, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use futures_util::StreamExt as _;
use lock_core::LockClient;
use lock_tower::idempotency::IdempotencyLayer;
use lock_tower::lock::{DistributedLockLayer, OutagePolicy};
use tokio::sync::Notify;
use tower::ServiceExt as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// In every lock name and idempotency key of the scenarios, and in no template.
const MARK: &str = "leakmark";

/// The events whose absence of names is checked (and, in the control, whose names are
/// seen): at least one of each must be captured, or the scenarios did not reach it.
const CHECKED: [&str; 12] = [
    "acquired",
    "gave up waiting",
    "re-entered",
    "released",
    "force-released by an operator",
    "distlock.hold.lost",
    "lingering",
    "job skipped: held elsewhere",
    "request rejected by the lock layer",
    "idempotent request refused",
    "redis cannot be reached: lock requests fail until it is back",
    "distlock.renewal.failed",
];

/// One span's or event's fields as captured: its message (an event's) or name (a span's),
/// and every field as `key=value`.
#[derive(Clone, Debug)]
struct Emitted {
    what: String,
    fields: Vec<String>,
}

impl Emitted {
    fn names_a_lock(&self) -> bool {
        self.what.contains(MARK) || self.fields.iter().any(|f| f.contains(MARK))
    }
}

/// A layer keeping every field lock-core and lock-tower emit: a span's at its creation and
/// at each record, an event's.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Emitted>>>);

impl Capture {
    fn all(&self) -> Vec<Emitted> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn push(&self, emitted: Emitted) {
        (self.0.lock().unwrap_or_else(PoisonError::into_inner)).push(emitted);
    }

    /// Keeps the fields `record` visits, of a span (`what` its name) or an event (its
    /// message) of lock-core or lock-tower.
    fn keep(&self, metadata: &Metadata<'_>, record: impl FnOnce(&mut Fields)) {
        if !ours(metadata) {
            return;
        }
        let mut fields = Fields::default();
        record(&mut fields);
        let what = fields.message.take();
        self.push(Emitted {
            what: what.unwrap_or_else(|| metadata.name().to_owned()),
            fields: fields.fields,
        });
    }

    /// True once an event with `message` was captured.
    fn saw(&self, message: &str) -> bool {
        self.all().iter().any(|e| e.what == message)
    }
}

/// The library's own spans and events: its crates' targets.
fn ours(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    target.starts_with("lock_core") || target.starts_with("lock_tower")
}

/// Every field as `key=value`; an event's message apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: Vec<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let value = format!("{value:?}");
        if field.name() == "message" {
            self.message = Some(value);
        } else {
            self.fields.push(format!("{}={value}", field.name()));
        }
    }
}

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.keep(attrs.metadata(), |fields| attrs.record(fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            self.keep(span.metadata(), |fields| values.record(fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        self.keep(event.metadata(), |fields| event.record(fields));
    }
}

/// A lock name of the scenarios: it carries the mark.
fn named(what: &str) -> String {
    format!("{MARK}-{what}")
}

/// Runs every scenario with a client that opts in to lock names or not, and answers what
/// the library emitted meanwhile.
async fn run_scenarios(names: bool) -> Vec<Emitted> {
    let capture = Capture::default();
    let subscriber =
        tracing_subscriber::registry().with(capture.clone().with_filter(LevelFilter::TRACE));
    let _default = tracing::subscriber::set_default(subscriber);
    let mut server = RedisServer::start();
    // A short lease: the watchdog renews every 300 ms.
    let locks = builder(&server.url())
        .lease(Duration::from_millis(900))
        .trace_lock_names(names)
        .build()
        .unwrap();
    acquisitions(&server, &locks, &capture).await;
    force_release(&locks).await;
    jobs(&locks).await;
    election(&locks).await;
    lock_layer(&locks).await;
    idempotency_layer(&locks).await;
    outage(&mut server, &locks, &capture).await;
    let all = capture.all();
    for message in CHECKED {
        assert!(
            all.iter().any(|e| e.what == message),
            "the scenarios emitted no {message:?}: {all:#?}"
        );
    }
    all
}

/// Taken at once, handed over to a queued waiter, re-entered, timed out, renewed.
async fn acquisitions(server: &RedisServer, locks: &LockClient, capture: &Capture) {
    let name = named("handed");
    let holder = locks.lock(&*name).metrics_label("leak_a").await.unwrap();
    let waiter = tokio::spawn(
        locks
            .lock(&*name)
            .metrics_label("leak_a")
            .wait(GENEROUS)
            .acquire(),
    );
    let conn = server.conn().await;
    let queue = queue_key(&name);
    wait_until("the waiter is queued", GENEROUS, || {
        let (mut conn, queue) = (conn.clone(), queue.clone());
        async move { queued(&mut conn, &queue).await == 1 }
    })
    .await;
    holder.release().await.unwrap();
    let handed = waiter.await.unwrap().unwrap();
    let busy = locks
        .lock(&*name)
        .metrics_label("leak_a")
        .wait(Duration::from_millis(50));
    assert!(busy.await.unwrap_err().is_wait_timeout());
    wait_until("a renewal", GENEROUS, || async { capture.saw("renewed") }).await;
    handed.release().await.unwrap();
    lock_core::scope(async {
        let outer = locks.lock(named("scoped")).await.unwrap();
        let inner = locks.lock(named("scoped")).await.unwrap();
        drop(inner);
        outer.release().await.unwrap();
    })
    .await;
}

/// An operator's force release, and the loss its holder is told of.
async fn force_release(locks: &LockClient) {
    let guard = locks
        .lock(named("forced"))
        .metrics_label("leak_f")
        .await
        .unwrap();
    let lost = guard.lost();
    assert!(locks.force_release(named("forced")).await.unwrap());
    tokio::time::timeout(GENEROUS, lost).await.expect("told");
}

/// A job run (it lingers) and one skipped while held elsewhere.
async fn jobs(locks: &LockClient) {
    let ran = locks
        .job(named("job"))
        .hold_at_least(Duration::from_millis(100));
    assert!(!ran.run(async {}).await.unwrap().is_skipped());
    let held = locks.lock(named("job-held")).await.unwrap();
    let skipped = locks.job(named("job-held")).run(async {}).await.unwrap();
    assert!(skipped.is_skipped());
    held.release().await.unwrap();
}

/// A campaign, a read of the leader, an observer's first answer, a resignation.
async fn election(locks: &LockClient) {
    let election = locks.election(named("election")).value("node-1");
    let leadership = election.campaign().await.unwrap();
    assert!(election.leader().await.unwrap().is_some());
    let mut observe = election.observe();
    let first = tokio::time::timeout(GENEROUS, observe.next()).await;
    assert!(first.expect("an answer").is_some());
    leadership.resign().await.unwrap();
}

/// An axum route under the lock layer, its lock held elsewhere: the request is rejected.
async fn lock_layer(locks: &LockClient) {
    let layer = DistributedLockLayer::builder(locks.clone())
        .key("item_<id:str>")
        .wait(Duration::from_millis(50))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}", post(|| async {}))
        .route_layer(layer);
    let id = named("item");
    let held = locks.lock(format!("item_{id}")).await.unwrap();
    let request = Request::post(format!("/items/{id}"))
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    held.release().await.unwrap();
}

/// The idempotency layer: a key in flight refuses its duplicate; a key reused with another
/// body is refused.
async fn idempotency_layer(locks: &LockClient) {
    let gate = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let handler = {
        let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
        post(move || async move {
            entered.notify_one();
            gate.notified().await;
        })
    };
    let layer = IdempotencyLayer::builder(locks.clone())
        .namespace("leak")
        .build();
    let app = Router::new().route("/pay", handler).layer(layer);
    let key = named("payment");
    let request = |body: &'static str| {
        Request::post("/pay")
            .header("idempotency-key", &key)
            .body(Body::from(body))
            .unwrap()
    };
    let first = tokio::spawn(app.clone().oneshot(request("a")));
    tokio::time::timeout(GENEROUS, entered.notified())
        .await
        .expect("the first request runs");
    let duplicate = app.clone().oneshot(request("a")).await.unwrap();
    assert_eq!(duplicate.status(), StatusCode::CONFLICT);
    gate.notify_one();
    assert!(first.await.unwrap().unwrap().status().is_success());
    let reused = app.oneshot(request("b")).await.unwrap();
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// Redis dies under a renewed hold: renewals fail, an acquisition finds Redis down, the
/// layer fails open, and the hold's release fails in the background.
async fn outage(server: &mut RedisServer, locks: &LockClient, capture: &Capture) {
    let guard = locks
        .lock(named("outage"))
        .metrics_label("leak_o")
        .await
        .unwrap();
    let layer = DistributedLockLayer::builder(locks.clone())
        .key("item_<id:str>")
        .on_outage(OutagePolicy::FailOpen)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}", post(|| async {}))
        .route_layer(layer);
    server.kill();
    wait_until("a renewal fails", GENEROUS, || async {
        capture.saw("distlock.renewal.failed")
    })
    .await;
    let down = locks.lock(named("outage-2")).await.unwrap_err();
    assert!(down.is_unavailable(), "{down}");
    let request = Request::post(format!("/items/{}", named("open")))
        .body(Body::empty())
        .unwrap();
    assert!(app.oneshot(request).await.unwrap().status().is_success());
    drop(guard);
    wait_until("the background release fails", GENEROUS, || async {
        capture.saw("background release failed")
    })
    .await;
}

/// The default: nothing the library emits names a lock, in any scenario.
#[tokio::test(flavor = "current_thread")]
async fn no_event_or_span_names_a_lock_without_the_opt_in() {
    let emitted = run_scenarios(false).await;
    let leaks: Vec<&Emitted> = emitted.iter().filter(|e| e.names_a_lock()).collect();
    assert!(
        leaks.is_empty(),
        "lock names without the opt-in: {leaks:#?}"
    );
}

/// The control: opted in, the same capture finds the names, in every event checked.
#[tokio::test(flavor = "current_thread")]
async fn with_the_opt_in_the_same_capture_finds_the_names() {
    let emitted = run_scenarios(true).await;
    for message in CHECKED {
        assert!(
            emitted
                .iter()
                .any(|e| e.what == message && e.names_a_lock()),
            "{message:?} does not name its lock with the opt-in: {emitted:#?}"
        );
    }
}
