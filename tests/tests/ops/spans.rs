//! Spans an operator reads (lock-core's `trace` module): `distlock.acquire` and
//! `distlock.hold` with their fields, the events inside a hold, and the outcome lock-tower
//! puts on the request's span, captured by a `tracing` layer (`distlock_tests::spans`).
//!
//! One capture layer is the global subscriber of this binary; each test uses its own metrics
//! label (the spans' `distlock.lock.template`), so parallel tests never read each other's.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use distlock_tests::locks::{builder, client, wait_until, GENEROUS};
use distlock_tests::spans::{self, CapturedSpan};
use distlock_tests::RedisServer;
use lock_tower::lock::DistributedLockLayer;
use tokio::sync::Notify;
use tower::ServiceExt as _;
use tracing::field::Empty;
use tracing::Instrument as _;

const TEMPLATE: &str = "distlock.lock.template";
const NAME: &str = "distlock.lock.name";

/// The one span named `name` of the family `template` (panics if there are several).
fn only(name: &str, template: &str) -> CapturedSpan {
    let mut found = spans::find(name, TEMPLATE, template);
    assert_eq!(found.len(), 1, "one {name} of {template}: {found:#?}");
    found.remove(0)
}

/// True when the span says the hold ended lost, with a reason: what an operator alerts on.
fn ended_lost(hold: &CapturedSpan) -> bool {
    hold.field("distlock.hold.end") == Some("lost")
        && hold.field("distlock.hold.loss_reason").is_some()
}

/// True when the span carries no lock name: the default, low-cardinality shape.
fn nameless(span: &CapturedSpan) -> bool {
    span.field(NAME).is_none()
}

/// An uncontended acquisition: one attempt, not handed over, under the caller's span; the
/// hold beside it from the grant to the release, with its fencing token.
#[tokio::test]
async fn an_uncontended_acquisition_and_its_hold_are_spans_under_the_callers() {
    spans::install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    let caller = tracing::info_span!("caller");
    let guard = locks
        .lock("spans_a_1")
        .metrics_label("spans_uncontended")
        // A request is a future: made here, polled in the caller's span, its spans go under
        // the span it runs in.
        .instrument(caller)
        .await
        .unwrap();
    let acquire = only("distlock.acquire", "spans_uncontended");
    assert_eq!(acquire.field("distlock.acquire.outcome"), Some("acquired"));
    assert_eq!(acquire.field("distlock.acquire.attempts"), Some("1"));
    assert_eq!(acquire.field("distlock.acquire.handed_over"), Some("false"));
    assert_eq!(acquire.field("distlock.lock.kind"), Some("exclusive"));
    assert!(acquire.number("distlock.acquire.wait_duration").unwrap() >= 0.0);
    assert!(acquire.closed && nameless(&acquire), "{acquire:#?}");
    let caller = spans::span(acquire.parent.expect("under the caller's span"));
    assert_eq!(caller.name, "caller");
    let hold = only("distlock.hold", "spans_uncontended");
    assert_eq!(
        hold.parent,
        Some(caller.index),
        "the hold is the acquisition's sibling"
    );
    let token = guard.fencing_token().to_string();
    assert_eq!(hold.field("distlock.hold.fencing_token"), Some(&*token));
    assert!(!hold.closed, "open while held");
    guard.release().await.unwrap();
    let hold = spans::span(hold.index);
    assert!(hold.closed, "closed at the release: {hold:#?}");
    assert_eq!(hold.field("distlock.hold.end"), Some("released"));
    assert!(!ended_lost(&hold), "{hold:#?}");
}

/// A hold force-released by an operator ends `lost` with the reason, and a WARN event inside
/// it; a released one ends `released` without a reason (the control: the loss check fails
/// on it).
#[tokio::test]
async fn a_lost_hold_ends_lost_with_its_reason_and_a_released_one_does_not() {
    spans::install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    let released = locks.lock("spans_l_1").metrics_label("spans_released");
    released.await.unwrap().release().await.unwrap();
    let released = only("distlock.hold", "spans_released");
    let guard = locks
        .lock("spans_l_2")
        .metrics_label("spans_lost")
        .await
        .unwrap();
    let lost = guard.lost();
    assert!(client(&server.url())
        .force_release("spans_l_2")
        .await
        .unwrap());
    tokio::time::timeout(GENEROUS, lost)
        .await
        .expect("told it is lost");
    let hold = only("distlock.hold", "spans_lost");
    assert!(hold.closed && ended_lost(&hold), "{hold:#?}");
    assert_eq!(hold.field("otel.status_code"), Some("ERROR"));
    let reason = hold.field("distlock.hold.loss_reason").unwrap();
    assert!(
        reason.contains("force-released") || reason.contains("renewal found the lock"),
        "{reason}"
    );
    let event = hold
        .events
        .iter()
        .find(|e| e.message == "distlock.hold.lost");
    let event = event.unwrap_or_else(|| panic!("a loss event in {hold:#?}"));
    assert_eq!(event.level, tracing::Level::WARN);
    assert_eq!(
        event.fields.get("distlock.hold.loss_reason").unwrap(),
        reason
    );
    // The control: the same check on the released hold fails, and its end differs.
    assert!(!ended_lost(&released), "{released:#?}");
    assert_ne!(
        released.field("distlock.hold.end"),
        hold.field("distlock.hold.end")
    );
    assert_eq!(released.field("otel.status_code"), None);
}

/// Lock names are span attributes only when the client opts in; the template always is.
#[tokio::test]
async fn lock_names_are_attributes_only_when_the_client_opts_in() {
    spans::install();
    let server = RedisServer::start();
    let default = client(&server.url());
    let named = builder(&server.url())
        .trace_lock_names(true)
        .build()
        .unwrap();
    let lock = default.lock("spans_n_1").metrics_label("spans_nameless");
    lock.await.unwrap().release().await.unwrap();
    let lock = named.lock("spans_n_2").metrics_label("spans_named");
    lock.await.unwrap().release().await.unwrap();
    for span in ["distlock.acquire", "distlock.hold"] {
        let nameless_span = only(span, "spans_nameless");
        assert!(nameless(&nameless_span), "{nameless_span:#?}");
        // The control: the same check fails once the client opted in.
        let named_span = only(span, "spans_named");
        assert!(!nameless(&named_span), "{named_span:#?}");
        assert_eq!(named_span.field(NAME), Some("spans_n_2"));
    }
}

/// Through lock-tower: a request that waited for another's lock and was handed it by
/// message. Its span gets the outcome (fields it declared), and lock-core's spans are its
/// children: the acquisition (`handed_over=true`, a wait) and the hold.
#[tokio::test]
async fn a_request_handed_the_lock_shows_it_on_its_span() {
    spans::install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    let release_first = Arc::new(Notify::new());
    let gate = Arc::clone(&release_first);
    let handler = post(move |body: String| {
        let gate = Arc::clone(&gate);
        async move {
            if body == "first" {
                gate.notified().await;
            }
            body
        }
    });
    let layer = DistributedLockLayer::builder(locks.clone())
        .key("spans_item_<id:str>")
        .metrics_label("spans_tower")
        .wait(GENEROUS)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}", handler)
        .route_layer(layer);
    let call = |who: &'static str| {
        let request = Request::post("/items/7").body(Body::from(who)).unwrap();
        // What a `TraceLayer::make_span_with` would make, with the fields the layer fills.
        let span = tracing::info_span!(
            "request",
            who,
            distlock.acquire.outcome = Empty,
            distlock.acquire.wait_duration = Empty,
        );
        tokio::spawn(app.clone().oneshot(request).instrument(span))
    };
    let first = call("first");
    wait_until("the first request holds the lock", GENEROUS, || async {
        locks.inspect("spans_item_7").await.unwrap().is_held()
    })
    .await;
    let second = call("second");
    wait_until("the second request is queued", GENEROUS, || async {
        locks.inspect("spans_item_7").await.unwrap().waiters() == 1
    })
    .await;
    release_first.notify_one();
    for reply in [first, second] {
        assert_eq!(reply.await.unwrap().unwrap().status(), StatusCode::OK);
    }
    let requests = spans::find("request", "who", "second");
    let [request] = &requests[..] else {
        panic!("one second request: {requests:#?}")
    };
    println!("{}", spans::tree(request.index));
    assert_eq!(request.field("distlock.acquire.outcome"), Some("acquired"));
    let waited = request.number("distlock.acquire.wait_duration").unwrap();
    assert!(waited > 0.0, "{request:#?}");
    let acquires = spans::find("distlock.acquire", TEMPLATE, "spans_tower");
    let acquire = acquires.iter().find(|s| s.parent == Some(request.index));
    let acquire = acquire.unwrap_or_else(|| panic!("an acquisition under {request:#?}"));
    assert_eq!(acquire.field("distlock.acquire.handed_over"), Some("true"));
    assert_eq!(acquire.field("distlock.acquire.outcome"), Some("acquired"));
    assert!(acquire.number("distlock.acquire.wait_duration").unwrap() > 0.0);
    let holds = spans::find("distlock.hold", TEMPLATE, "spans_tower");
    let hold = holds.iter().find(|s| s.parent == Some(request.index));
    let hold = hold.unwrap_or_else(|| panic!("a hold under {request:#?}"));
    assert!(hold.closed, "released with the response: {hold:#?}");
    assert_eq!(hold.field("distlock.hold.end"), Some("released"));
    // The control: the first request took the free lock, not handed over.
    let first = spans::find("request", "who", "first");
    let handed = acquires.iter().find(|s| s.parent == Some(first[0].index));
    assert_eq!(
        handed.and_then(|s| s.field("distlock.acquire.handed_over")),
        Some("false")
    );
}
