//! One item, many spellings: the layer locks the value the handler reads, not the text.
//!
//! `Path<u64>` reads `/8`, `/08`, `/+8`, `/008` and `/%38` as one item 8; a layer that locked
//! the raw text took five locks for it, and five purchases of item 8 ran at once. The cells
//! below — every placeholder type × every source (path, query, header) × every layer form
//! (lock, read/write by method, semaphore) — are generated from one table. In each, while a
//! holder outside the app holds item 8's name, no spelling reaches the handler; and all
//! spellings sent together run one at a time (at most one handler in flight, measured).
//! A negative control shows the detector fires on a raw-text (`:str`) key.

use std::fmt::Display;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use distlock_tests::locks::{self, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{LockClient, LockGuard};
use lock_tower::lock::DistributedLockLayer;
use lock_tower::semaphore::DistributedSemaphoreLayer;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use uuid::Uuid;

use crate::axum_router::{send_with, serve, Reply};

/// Where the placeholder takes its value.
#[derive(Clone, Copy, Debug)]
enum Source {
    Path,
    Query,
    Header,
}

/// Which layer takes the hold.
#[derive(Clone, Copy, Debug)]
enum Form {
    Lock,
    ReadWriteByMethod,
    Semaphore,
}

const SOURCES: [Source; 3] = [Source::Path, Source::Query, Source::Header];
const FORMS: [Form; 3] = [Form::Lock, Form::ReadWriteByMethod, Form::Semaphore];

/// One type: its name in a template, the value's `Display`, and the spellings of that value
/// each source's extractor accepts (query spellings are percent-encoded where `+` or a
/// space would otherwise change them).
struct Spellings {
    ty: &'static str,
    value: &'static str,
    path: &'static [&'static str],
    query: &'static [&'static str],
    header: &'static [&'static str],
}

const U64: Spellings = Spellings {
    ty: "u64",
    value: "8",
    path: &["8", "08", "+8", "008", "%38", "%2B8"],
    query: &["8", "08", "%2B8", "008", "%38"],
    header: &["8", "08", "+8", "008"],
};

const I64: Spellings = Spellings {
    ty: "i64",
    value: "-8",
    path: &["-8", "-08", "-008", "%2D8", "-%30%38"],
    query: &["-8", "-08", "%2D8", "-%38"],
    header: &["-8", "-08", "-0008"],
};

const UUID: Spellings = Spellings {
    ty: "uuid",
    value: "67e55044-10b1-426f-9247-bb680e5fe0c8",
    path: &[
        "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "67E55044-10B1-426F-9247-BB680E5FE0C8",
        "67e5504410b1426f9247bb680e5fe0c8",
        "%7B67e55044-10b1-426f-9247-bb680e5fe0c8%7D",
        "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
    ],
    query: &[
        "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "67E55044-10B1-426F-9247-BB680E5FE0C8",
        "67E5504410B1426F9247BB680E5FE0C8",
        "%7B67e55044-10b1-426f-9247-bb680e5fe0c8%7D",
        "urn%3Auuid%3A67e55044-10b1-426f-9247-bb680e5fe0c8",
    ],
    header: &[
        "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "67E55044-10B1-426F-9247-BB680E5FE0C8",
        "{67e55044-10b1-426f-9247-bb680e5fe0c8}",
        "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
    ],
};

/// Raw text, by choice: the spellings are those of the encoding, the text is one.
const STR: Spellings = Spellings {
    ty: "str",
    value: "Ab c",
    path: &["Ab%20c", "%41b%20c", "A%62%20%63"],
    query: &["Ab+c", "Ab%20c", "%41b+c", "A%62%20c"],
    // Header values arrive as they are; the server drops the whitespace around them.
    header: &["Ab c", "  Ab c"],
};

impl Spellings {
    fn of(&self, source: Source) -> &'static [&'static str] {
        match source {
            Source::Path => self.path,
            Source::Query => self.query,
            Source::Header => self.header,
        }
    }
}

/// The lock name every spelling must take: `t_` and the value, encoded as names are.
fn name_of(value: &str) -> String {
    let mut name = "t_".to_owned();
    lock_core::encode_value(&mut name, value);
    name
}

/// Handlers entered for the value, in flight now and at most, and what they read.
#[derive(Clone, Default)]
struct Flight {
    entered: Arc<AtomicUsize>,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    read: Arc<Mutex<Vec<String>>>,
}

impl Flight {
    /// Counts a handler that read `value` while it holds for a few milliseconds, so that two
    /// handlers under different locks would overlap.
    async fn run(&self, value: impl Display) -> &'static str {
        self.read.lock().unwrap().push(value.to_string());
        self.entered.fetch_add(1, Ordering::SeqCst);
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(15)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        "ok"
    }
}

#[derive(Deserialize)]
struct N<T> {
    n: T,
}

/// The app of one cell: a handler reading `T` from `source` with the extractor a user would
/// write, behind `layer`.
fn app<T>(source: Source, flight: &Flight, layer: Layered) -> Router
where
    T: DeserializeOwned + FromStr + Display + Send + 'static,
{
    let flight = flight.clone();
    let route = match source {
        Source::Path => Router::new().route(
            "/p/{id}",
            post(move |Path(id): Path<T>| async move { flight.run(id).await }),
        ),
        Source::Query => Router::new().route(
            "/q",
            post(move |Query(q): Query<N<T>>| async move { flight.run(q.n).await }),
        ),
        Source::Header => Router::new().route(
            "/h",
            post(move |headers: HeaderMap| async move {
                let text = headers["x-n"].to_str().expect("visible ASCII");
                // As a handler would: `FromStr` (its error need not be `Send`).
                let value = text.parse::<T>().ok();
                match value {
                    Some(value) => flight.run(value).await,
                    None => "not a value",
                }
            }),
        ),
    };
    match layer {
        Layered::Lock(layer) => route.route_layer(layer),
        Layered::Semaphore(layer) => route.route_layer(layer),
    }
}

enum Layered {
    Lock(DistributedLockLayer),
    Semaphore(DistributedSemaphoreLayer),
}

/// The cell's template, e.g. `t_<query.n:u64>`.
fn template(source: Source, ty: &str) -> String {
    match source {
        Source::Path => format!("t_<id:{ty}>"),
        Source::Query => format!("t_<query.n:{ty}>"),
        Source::Header => format!("t_<header.x-n:{ty}>"),
    }
}

fn layer(client: &LockClient, form: Form, template: &str, wait: Duration) -> Layered {
    match form {
        Form::Lock | Form::ReadWriteByMethod => {
            let builder = DistributedLockLayer::builder(client.clone())
                .key(template)
                .wait(wait);
            let builder = match form {
                Form::ReadWriteByMethod => builder.read_write_by_method(),
                _ => builder,
            };
            Layered::Lock(builder.build().expect("layer"))
        }
        Form::Semaphore => Layered::Semaphore(
            DistributedSemaphoreLayer::builder(client.clone(), 1)
                .key(template)
                .wait(wait)
                .build()
                .expect("layer"),
        ),
    }
}

/// A hold of `name` outside the app, of the kind the form's `POST` takes, and the status a
/// request meeting it gets.
async fn hold(client: &LockClient, form: Form, name: &str) -> (LockGuard, u16) {
    match form {
        Form::Lock => (client.lock(name).await.expect("hold"), 409),
        Form::ReadWriteByMethod => (client.write_lock(name).await.expect("hold"), 409),
        Form::Semaphore => (client.semaphore(name, 1).await.expect("hold"), 429),
    }
}

async fn send_spelling(addr: SocketAddr, source: Source, spelling: &str) -> Reply {
    match source {
        Source::Path => send_with(addr, "POST", &format!("/p/{spelling}"), &[]).await,
        Source::Query => send_with(addr, "POST", &format!("/q?n={spelling}"), &[]).await,
        Source::Header => send_with(addr, "POST", "/h", &[("x-n", spelling)]).await,
    }
}

/// Sends every spelling `rounds` times, all at once; the statuses in sending order.
async fn send_all(addr: SocketAddr, source: Source, spellings: &[&str], rounds: usize) -> Vec<u16> {
    let requests: Vec<_> = (0..rounds)
        .flat_map(|_| spellings.iter())
        .map(|spelling| {
            let spelling = spelling.to_string();
            tokio::spawn(async move { send_spelling(addr, source, &spelling).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.expect("request task"));
    }
    statuses
}

/// One cell: no spelling passes a hold of the value's name, and together they run one at a
/// time, each handler reading the one value.
async fn cell<T>(
    client: &LockClient,
    holder: &LockClient,
    types: &Spellings,
    source: Source,
    form: Form,
) where
    T: DeserializeOwned + FromStr + Display + Send + 'static,
{
    let what = format!("{} from {source:?} with {form:?}", types.ty);
    let spellings = types.of(source);
    let template = template(source, types.ty);
    let name = name_of(types.value);

    let flight = Flight::default();
    let quick = serve(app::<T>(
        source,
        &flight,
        layer(client, form, &template, Duration::from_millis(150)),
    ))
    .await;
    let (guard, busy) = hold(holder, form, &name).await;
    let statuses = send_all(quick, source, spellings, 1).await;
    assert!(
        statuses.iter().all(|s| *s == busy),
        "{what}: every spelling of {} must meet its hold ({busy}): {spellings:?} got {statuses:?}",
        types.value
    );
    assert_eq!(
        flight.entered.load(Ordering::SeqCst),
        0,
        "{what}: a spelling reached the handler beside the holder"
    );
    guard.release().await.expect("release");

    let flight = Flight::default();
    let patient = serve(app::<T>(
        source,
        &flight,
        layer(client, form, &template, GENEROUS),
    ))
    .await;
    let rounds = 2;
    let statuses = send_all(patient, source, spellings, rounds).await;
    assert!(statuses.iter().all(|s| *s == 200), "{what}: {statuses:?}");
    assert_eq!(
        flight.entered.load(Ordering::SeqCst),
        spellings.len() * rounds,
        "{what}"
    );
    assert_eq!(
        flight.most.load(Ordering::SeqCst),
        1,
        "{what}: two handlers ran on one value at once"
    );
    let read = flight.read.lock().unwrap().clone();
    assert!(
        read.iter().all(|v| v == types.value),
        "{what}: the handler read {read:?}"
    );
}

/// Every type × source × layer form, from the table above.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_spelling_of_one_value_takes_one_lock() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let holder = locks::client(&server.url());
    let mut cells = 0;
    for source in SOURCES {
        for form in FORMS {
            cell::<u64>(&client, &holder, &U64, source, form).await;
            cell::<i64>(&client, &holder, &I64, source, form).await;
            cell::<Uuid>(&client, &holder, &UUID, source, form).await;
            cell::<String>(&client, &holder, &STR, source, form).await;
            cells += 4;
        }
    }
    assert_eq!(cells, 36);
}

/// The detector's negative control: with the raw text in the name (`<id:str>` on a
/// `Path<u64>` handler — the old default), spellings of item 8 other than `8` pass its
/// hold and reach the handler. This is the bypass the typed placeholders close.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raw_text_keys_let_other_spellings_past_the_hold() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let flight = Flight::default();
    let raw = layer(
        &client,
        Form::Lock,
        "t_<id:str>",
        Duration::from_millis(150),
    );
    let addr = serve(app::<u64>(Source::Path, &flight, raw)).await;
    let (guard, busy) = hold(&client, Form::Lock, &name_of("8")).await;
    let statuses = send_all(addr, Source::Path, U64.path, 1).await;
    // Only the spellings whose decoded text is `8` (`8` and `%38`) meet the hold.
    let expected: Vec<u16> = ["8", "08", "+8", "008", "8", "+8"]
        .iter()
        .map(|text| if *text == "8" { busy } else { 200 })
        .collect();
    assert_eq!(statuses, expected, "{:?}", U64.path);
    assert_eq!(
        flight.entered.load(Ordering::SeqCst),
        4,
        "the detector fires"
    );
    guard.release().await.expect("release");
}

/// A value the type rejects is the extractor's `400`, before any lock is taken: no key is
/// written and the handler is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_the_type_rejects_are_answered_400_without_a_lock() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let mut conn = server.conn().await;
    for (source, ty, bad) in [
        (Source::Path, "u64", "-8"),
        (Source::Path, "u64", "x"),
        (Source::Query, "i64", "8.0"),
        (Source::Header, "uuid", "67e55044"),
    ] {
        let flight = Flight::default();
        let layer = layer(&client, Form::Lock, &template(source, ty), GENEROUS);
        let addr = serve(app::<String>(source, &flight, layer)).await;
        let reply = send_spelling(addr, source, bad).await;
        assert_eq!(reply.status, 400, "{ty} {bad:?} from {source:?}: {reply:?}");
        assert!(reply.body.contains("is not a valid"), "{reply:?}");
        assert_eq!(flight.entered.load(Ordering::SeqCst), 0);
    }
    let keys = locks::keys_left(&mut conn).await;
    assert!(keys.is_empty(), "no lock was attempted: {keys:?}");
}
