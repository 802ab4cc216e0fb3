//! The sending side: gateway tasks that spread each key's requests over the live
//! processes' servers, as a load balancer in front of a fleet does with a client's retries.
//!
//! Each epoch a task takes 2–4 of its keys, one after another, and starts 1–3 callers for
//! each at once (concurrent duplicates). A caller sends the request to a random live server and retries
//! — on another server — after its own timeout (a paused process leaves it hanging), a cut
//! or refused connection (a killed one), after a `409` (waiting as `Retry-After` allows)
//! or a `503`; once answered `2xx`, now and then it sends the request once more (a replay).
//! Every request is an operation of the history: `Invoke` (kind `http`), `HttpSent`, then
//! `HttpAnswer` and `Complete` (`ok` for `2xx`, `fail:<status>` for another `4xx`,
//! `info:<status>` for a `5xx`), or `Complete` alone: `fail:refused` (nothing was sent),
//! `info:timeout`, `info:cut`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::rng::Rng;
use futures_util::future::join_all;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::ports::Ports;
use super::{key_name, request_body, GRACE, HOLD_HEADER, KEYS, OP_HEADER, PATH, THINK_HEADER};
use crate::history::{Event, Outcome};
use crate::idempotency::EPOCH;
use crate::workload::{think_max, Ctx, LEASE};

type Http = Client<HttpConnector, Full<Bytes>>;

/// Attempts per caller, whatever the answers.
const ATTEMPTS: usize = 10;
/// At most this many epochs per task, whatever the duration.
const MAX_EPOCHS_PER_TASK: u64 = 1_000_000;
/// How many of an epoch's keys a task takes.
const KEYS_PER_TASK: std::ops::Range<u64> = 2..5;

/// How one attempt ended, for the caller's next step.
enum Sent {
    /// A response: its status and `Retry-After`.
    Answered(StatusCode, Option<u64>),
    /// No answer: timed out, cut, refused, or no server published.
    Unanswered,
}

/// Sends requests until the run stops; `task` separates the tasks' generators. Each epoch
/// the task takes a few of its keys, in a random order, one at a time; then it waits for
/// the next epoch (the other processes' tasks take some of the same keys).
pub(crate) async fn run(ctx: Arc<Ctx>, ports: Ports, task: u32) {
    let http: Http = Client::builder(TokioExecutor::new()).build_http();
    let mut rng = Rng::new(ctx.config.seed ^ 0x6874_7470 ^ (u64::from(task) << 40));
    let epoch_ns = EPOCH.as_nanos() as u64;
    for _ in 0..MAX_EPOCHS_PER_TASK {
        if ctx.stopping() {
            return;
        }
        let epoch = monotonic_ns() / epoch_ns;
        let deadline = (epoch + 1) * epoch_ns + GRACE.as_nanos() as u64;
        let mut keys: Vec<u64> = (0..KEYS).collect();
        for _ in 0..rng.below(KEYS_PER_TASK) {
            let k = keys.swap_remove(rng.index(keys.len()));
            let key = key_name(epoch, k);
            let callers: Vec<Rng> = (0..rng.below(1..4))
                .map(|_| Rng::new(rng.next_u64()))
                .collect();
            let caller = |rng| call(&ctx, &http, &ports, &key, deadline, rng);
            join_all(callers.into_iter().map(caller)).await;
        }
        let next = (epoch + 1) * epoch_ns;
        let wait = next.saturating_sub(monotonic_ns());
        tokio::time::sleep(Duration::from_nanos(wait)).await;
    }
}

/// One caller of `key`: retries until answered `2xx`, refused for good, or `deadline`.
async fn call(ctx: &Ctx, http: &Http, ports: &Ports, key: &str, deadline: u64, mut rng: Rng) {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        if ctx.stopping() || monotonic_ns() >= deadline {
            return;
        }
        let (server, sent) = send(ctx, http, ports, key, &mut rng, last).await;
        last = server;
        match sent {
            Sent::Answered(status, _) if status.is_success() => {
                if rng.below(0..3) == 0 {
                    tokio::time::sleep(rng.millis(Duration::ZERO, Duration::from_secs(1))).await;
                    if !ctx.stopping() && monotonic_ns() < deadline {
                        send(ctx, http, ports, key, &mut rng, None).await;
                    }
                }
                return;
            }
            Sent::Answered(StatusCode::CONFLICT, retry_after) => {
                let most =
                    Duration::from_secs(retry_after.unwrap_or(1)).min(Duration::from_secs(1));
                tokio::time::sleep(rng.millis(Duration::from_millis(50), most)).await;
            }
            Sent::Answered(status, _) if status.is_server_error() => {
                let pause = rng.millis(Duration::from_millis(20), Duration::from_millis(200));
                tokio::time::sleep(pause).await;
            }
            Sent::Answered(..) => return,
            Sent::Unanswered if server.is_none() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Sent::Unanswered => {}
        }
    }
}

/// A live server, other than `avoid` when there is another.
fn pick(ports: &Ports, rng: &mut Rng, avoid: Option<u32>) -> Option<(u32, u16)> {
    let live = ports.live();
    let others: Vec<(u32, u16)> = live
        .iter()
        .copied()
        .filter(|&(p, _)| Some(p) != avoid)
        .collect();
    let from = if others.is_empty() { &live } else { &others };
    (!from.is_empty()).then(|| from[rng.index(from.len())])
}

/// How long the handler keeps the key after its effect: long enough, often, that a timeout,
/// a duplicate, a pause or a kill lands while it runs; now and then past the lease (the
/// watchdog keeps it).
fn hold(rng: &mut Rng) -> Duration {
    match rng.below(0..100) {
        0..60 => rng.millis(Duration::ZERO, Duration::from_millis(200)),
        60..92 => rng.millis(Duration::from_millis(200), LEASE),
        _ => rng.millis(LEASE, LEASE * 5 / 2),
    }
}

/// The attempt's own timeout: mostly patient, often not (then it lands in slow handlers).
fn timeout(rng: &mut Rng) -> Duration {
    if rng.below(0..10) < 7 {
        rng.millis(Duration::from_millis(1000), Duration::from_millis(3000))
    } else {
        rng.millis(Duration::from_millis(100), Duration::from_millis(600))
    }
}

/// One request, recorded; returns the server it went to and how it ended.
async fn send(
    ctx: &Ctx,
    http: &Http,
    ports: &Ports,
    key: &str,
    rng: &mut Rng,
    avoid: Option<u32>,
) -> (Option<u32>, Sent) {
    let Some((server, port)) = pick(ports, rng, avoid) else {
        return (None, Sent::Unanswered);
    };
    let op = ctx.next_op();
    let history = &ctx.history;
    let kind = "http".to_owned();
    let names = vec![key.to_owned()];
    history.log(op, Event::Invoke { kind, names });
    history.log(op, Event::HttpSent { server });
    let think = rng.millis(Duration::ZERO, think_max(&ctx.config));
    let request = Request::post(format!("http://127.0.0.1:{port}{PATH}"))
        .header("idempotency-key", key)
        .header(OP_HEADER, op)
        .header(THINK_HEADER, think.as_millis() as u64)
        .header(HOLD_HEADER, hold(rng).as_millis() as u64)
        .body(Full::new(Bytes::from(request_body(key))))
        .expect("a valid request");
    let exchange = async {
        let response = http.request(request).await.map_err(|e| {
            if e.is_connect() {
                Outcome::Fail("refused".into())
            } else {
                Outcome::Info("cut".into())
            }
        })?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|_| Outcome::Info("cut".into()))?
            .to_bytes();
        let header = |name| parts.headers.get(name)?.to_str().ok();
        let replayed = header(lock_tower::idempotency::REPLAYED_HEADER) == Some("true");
        let retry_after = header("retry-after").and_then(|v| v.parse().ok());
        Ok((parts.status, replayed, retry_after, body))
    };
    let (sent, outcome) = match tokio::time::timeout(timeout(rng), exchange).await {
        Ok(Ok((status, replayed, retry_after, body))) => {
            let body = String::from_utf8_lossy(&body).into_owned();
            let code = status.as_u16();
            history.log(
                op,
                Event::HttpAnswer {
                    status: code,
                    replayed,
                    body,
                },
            );
            let outcome = if status.is_success() {
                Outcome::Ok
            } else if status.is_server_error() {
                Outcome::Info(code.to_string())
            } else {
                Outcome::Fail(code.to_string())
            };
            (Sent::Answered(status, retry_after), outcome)
        }
        Ok(Err(outcome)) => (Sent::Unanswered, outcome),
        Err(_) => (Sent::Unanswered, Outcome::Info("timeout".into())),
    };
    history.log(op, Event::Complete { outcome });
    (Some(server), sent)
}
