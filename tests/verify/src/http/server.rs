//! A client process's HTTP server: `POST /effect` behind lock-tower's `IdempotencyLayer`,
//! whose lock client is the process's own (so the layer meets every fault the process's
//! locks meet). In the `nolock` control the layer is left out: the handler runs for every
//! request, with token 0.
//!
//! The handler does what a payment handler does (the `axum_payments` example): one effect
//! per key, fenced by the in-flight hold's token (the `LockInfo` the layer puts in the
//! request's extensions) and made idempotent by the key. It reads the key's register with
//! the token; finds an effect there (a run that was cancelled, lost its hold or crashed
//! after writing) and answers for it, or writes its own op id with the token. A refused
//! token (a newer run holds the key) is answered 503, as is a resource that did not answer;
//! neither stores anything.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Extension, Router};
use lock_core::LockInfo;
use lock_tower::idempotency::IdempotencyLayer;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::ports::Ports;
use super::{HandlerBody, HOLD_HEADER, OP_HEADER, PATH, RESOURCE_DOWN, SUPERSEDED, THINK_HEADER};
use crate::history::{Event, HistoryWriter, Outcome};
use crate::hold::{fenced_read, fenced_write};
use crate::idempotency::RETENTION;
use crate::register::Registers;
use crate::workload::Ctx;

/// The layer's namespace: its in-flight lock names start with it.
pub const NAMESPACE: &str = "verify";

#[derive(Clone)]
struct Handler {
    ctx: Arc<Ctx>,
    registers: Registers,
}

/// Serves the router on a free loopback port and publishes the port.
///
/// # Errors
/// When the port cannot be bound or published.
pub(crate) async fn start(
    ctx: Arc<Ctx>,
    registers: Registers,
    ports: &Ports,
) -> io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let proc = ctx.config.proc;
    let app = router(ctx, registers);
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("verify: client {proc}: the HTTP server stopped: {e}");
        }
    });
    ports.publish(proc, port)?;
    Ok(server)
}

fn router(ctx: Arc<Ctx>, registers: Registers) -> Router {
    let layer = (!ctx.no_lock()).then(|| {
        IdempotencyLayer::builder(ctx.client.clone())
            .namespace(NAMESPACE)
            .require_key()
            .retention(RETENTION)
            .build()
    });
    let route = Router::new().route(PATH, post(effect));
    let route = match layer {
        Some(layer) => route.route_layer(layer),
        None => route,
    };
    route.with_state(Handler { ctx, registers })
}

fn header<T: std::str::FromStr>(headers: &HeaderMap, name: &str) -> Option<T> {
    headers.get(name)?.to_str().ok()?.parse().ok()
}

fn millis(headers: &HeaderMap, name: &str) -> Duration {
    Duration::from_millis(header(headers, name).unwrap_or(0))
}

/// Records the run's completion; a run dropped before (its client went away and hyper
/// cancelled it, or the layer dropped it on a lost hold) is recorded `cancelled`.
struct RunRecord {
    history: HistoryWriter,
    op: u64,
    outcome: Option<Outcome>,
}

impl Drop for RunRecord {
    fn drop(&mut self) {
        let outcome = self
            .outcome
            .take()
            .unwrap_or_else(|| Outcome::Info("cancelled".into()));
        self.history.log(self.op, Event::Complete { outcome });
    }
}

/// One run of the handler: an operation of kind `http_run` in the serving process's history.
async fn effect(
    State(handler): State<Handler>,
    lock: Option<Extension<LockInfo>>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let Handler { ctx, mut registers } = handler;
    let key: String = header(&headers, "idempotency-key").unwrap_or_default();
    let token = lock.map_or(0, |Extension(info)| info.fencing_token());
    let op = ctx.next_op();
    let history = &ctx.history;
    let kind = "http_run".to_owned();
    let names = vec![key.clone()];
    history.log(op, Event::Invoke { kind, names });
    let request = header(&headers, OP_HEADER).unwrap_or(0);
    history.log(op, Event::HttpRun { request, token });
    let mut record = RunRecord {
        history: history.clone(),
        op,
        outcome: None,
    };
    let value = match fenced_read(history, &mut registers, op, &key, token).await {
        Ok(value) => value,
        Err(failed) => return refused(&mut record, &failed),
    };
    let effect = match value.split(',').next().and_then(|id| id.parse().ok()) {
        Some(earlier) => earlier,
        None => {
            tokio::time::sleep(millis(&headers, THINK_HEADER)).await;
            let own = op.to_string();
            match fenced_write(history, &mut registers, op, &key, token, &own).await {
                Outcome::Ok => op,
                failed => return refused(&mut record, &failed),
            }
        }
    };
    tokio::time::sleep(millis(&headers, HOLD_HEADER)).await;
    record.outcome = Some(Outcome::Ok);
    let body = HandlerBody {
        effect,
        run: op,
        key,
    };
    (StatusCode::CREATED, body.render())
}

/// The `503` of a refused token (a newer run holds the key) or of a resource that did not
/// answer: nothing is stored, the key is free for a retry.
fn refused(record: &mut RunRecord, failed: &Outcome) -> (StatusCode, String) {
    let (text, why) = match failed {
        Outcome::Info(_) => (RESOURCE_DOWN, "resource"),
        _ => (SUPERSEDED, "superseded"),
    };
    record.outcome = Some(Outcome::Fail(why.to_owned()));
    (StatusCode::SERVICE_UNAVAILABLE, text.to_owned())
}
