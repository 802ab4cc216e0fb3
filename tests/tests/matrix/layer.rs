//! The layer form of each kind: lock-tower's layer for it on an axum `Router`, driven with
//! `tower::ServiceExt::oneshot` (no sockets). The first request holds the kind while its
//! handler waits at a gate; a rival request gets the layer's documented busy answer
//! (lock-tower's docs: `409` for a busy lock or a key in flight, `429` for a full
//! semaphore, each with `Retry-After`); the hold is gone once the response is out. A kind
//! the topology refuses is answered by the layer itself (`500`, `RejectionKind::Internal`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::RETRY_AFTER;
use axum::http::{Method, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use distlock_tests::locks::{wait_until, GENEROUS};
use lock_tower::idempotency::{IdempotencyLayer, REPLAYED_HEADER};
use lock_tower::lock::DistributedLockLayer;
use lock_tower::semaphore::DistributedSemaphoreLayer;
use tokio::sync::{mpsc, watch};
use tokio::time::timeout;
use tower::ServiceExt as _;

use crate::cells::{held, Cell};
use crate::kind::Kind;
use crate::refusal::Refusal;

/// The idempotency key every request sends (the lock layers ignore it).
const KEY: &str = "k";

/// The handler's gate: each entry is reported, then waits until the gate opens.
#[derive(Clone)]
struct Gate {
    entered: mpsc::UnboundedSender<()>,
    open: watch::Receiver<bool>,
}

async fn gated(State(gate): State<Gate>) -> &'static str {
    let _ = gate.entered.send(());
    let mut open = gate.open.clone();
    let _ = open.wait_for(|open| *open).await;
    "done"
}

/// How a kind's layer is driven: the first request's method, whether a second one shares
/// the hold (readers), and the rival's method and the answer it gets.
struct Plan {
    first: Method,
    shared: bool,
    rival: Method,
    busy: StatusCode,
}

impl Plan {
    fn of(kind: Kind) -> Self {
        let plan = |first, shared, rival, busy| Plan {
            first,
            shared,
            rival,
            busy,
        };
        match kind {
            Kind::Lock | Kind::Idempotency => {
                plan(Method::POST, false, Method::POST, StatusCode::CONFLICT)
            }
            // `read_write_by_method`: GET reads beside GET, POST writes alone.
            Kind::Read => plan(Method::GET, true, Method::POST, StatusCode::CONFLICT),
            Kind::Write => plan(Method::POST, false, Method::GET, StatusCode::CONFLICT),
            Kind::Semaphore => plan(
                Method::GET,
                false,
                Method::GET,
                StatusCode::TOO_MANY_REQUESTS,
            ),
            other => panic!("{other:?} has no layer: the table lists this cell as not applicable"),
        }
    }
}

/// The gated route behind the kind's layer, and the name the layer locks; or the layer's
/// refusal to be built for this client.
fn app(cell: &Cell, gate: Gate) -> Result<(Router, String), Refusal> {
    let router = Router::new()
        .route("/r", get(gated).post(gated))
        .with_state(gate);
    let (client, name) = (cell.client().clone(), cell.name());
    let lock = |rw: bool| {
        let builder = DistributedLockLayer::builder(client.clone())
            .key(name)
            .wait(Duration::ZERO);
        let builder = if rw {
            builder.read_write_by_method()
        } else {
            builder
        };
        builder.build().map_err(Refusal::Build)
    };
    Ok(match cell.kind() {
        Kind::Lock => (router.route_layer(lock(false)?), name.to_owned()),
        Kind::Read | Kind::Write => (router.route_layer(lock(true)?), name.to_owned()),
        Kind::Semaphore => {
            let layer = DistributedSemaphoreLayer::new(client, name, 1).map_err(Refusal::Build)?;
            (router.route_layer(layer), name.to_owned())
        }
        // The in-flight lock is `<namespace>:<key>`.
        Kind::Idempotency => {
            let layer = IdempotencyLayer::builder(client).namespace(name).build();
            (router.route_layer(layer), format!("{name}:{KEY}"))
        }
        other => panic!("{other:?} has no layer: the table lists this cell as not applicable"),
    })
}

fn request(method: Method) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri("/r")
        .header("idempotency-key", KEY)
        .body(Body::empty())
        .expect("a valid request")
}

/// Runs the layer cell of `cell`'s kind.
pub(crate) async fn layer_form(cell: &Cell) -> Result<(), Refusal> {
    let plan = Plan::of(cell.kind());
    let (entered_tx, mut entered) = mpsc::unbounded_channel();
    let (open, open_rx) = watch::channel(false);
    let gate = Gate {
        entered: entered_tx,
        open: open_rx,
    };
    let (app, lock) = app(cell, gate)?;
    let names = [lock];
    let mut first = tokio::spawn(app.clone().oneshot(request(plan.first.clone())));
    // The handler runs, or the layer answers the request itself.
    let entry = timeout(GENEROUS, async {
        tokio::select! {
            _ = entered.recv() => None,
            answer = &mut first => Some(answer.expect("no panic").expect("infallible")),
        }
    });
    if let Some(answer) = entry.await.expect("the first request is answered or runs") {
        return Err(Refusal::Status(answer.status().as_u16()));
    }
    let mut running = vec![first];
    if plan.shared {
        running.push(tokio::spawn(app.clone().oneshot(request(plan.first))));
        timeout(GENEROUS, entered.recv())
            .await
            .expect("a second reader runs beside the first");
    }
    assert!(
        held(cell.client(), &names).await?,
        "not held while the handler runs"
    );
    let rival = app
        .clone()
        .oneshot(request(plan.rival))
        .await
        .expect("infallible");
    assert_eq!(rival.status(), plan.busy, "the rival's answer");
    assert!(rival.headers().contains_key(RETRY_AFTER), "{rival:?}");
    open.send(true).expect("the handlers wait");
    for task in running {
        let answer = timeout(GENEROUS, task).await.expect("answered");
        let answer = answer.expect("no panic").expect("infallible");
        assert_eq!(answer.status(), StatusCode::OK);
    }
    // Released before the response is handed on; under Redlock the other nodes follow.
    wait_until("the hold is gone after the response", GENEROUS, || async {
        !held(cell.client(), &names).await.expect("inspect")
    })
    .await;
    if cell.kind() == Kind::Idempotency {
        let replay = app
            .oneshot(request(Method::POST))
            .await
            .expect("infallible");
        assert_eq!(replay.status(), StatusCode::OK);
        assert_eq!(replay.headers()[REPLAYED_HEADER], "true");
        assert!(
            entered.try_recv().is_err(),
            "a duplicate ran the handler again"
        );
    }
    Ok(())
}
