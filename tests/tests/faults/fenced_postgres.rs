//! Fault suite, fencing a real Postgres row with the lock's token
//! (`distlock_examples::fenced_postgres`, the pattern the guide's "Fencing your database"
//! teaches). Holder A takes a lock with a short explicit lease (no watchdog) and stalls past
//! it; B takes the lock and writes the row with its token; then A writes with its stale
//! token. The fenced `UPDATE … AND fence <= $token` refuses every stale write (0 rows); the
//! negative control, the same update without the fence condition, lets every one land.
//! A private Postgres (`distlock_tests::postgres`), never the machine's.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use distlock_examples::fenced_postgres::{fence, router, set_price, Write, CREATE_TABLE};
use distlock_tests::fault::run_trials;
use distlock_tests::locks::GENEROUS;
use distlock_tests::postgres::PostgresServer;
use distlock_tests::RedisServer;
use http_body_util::BodyExt;
use lock_core::LockClient;
use tokio::task::block_in_place;
use tokio_postgres::Client;
use tower::ServiceExt;

/// A's lease: short, so the trials end quickly; B waits for it on the lock's event.
const LEASE: Duration = Duration::from_secs(1);
/// The price B writes; a stale write of A's leaves [`A_PRICE`].
const B_PRICE: i64 = 200;
const A_PRICE: i64 = 100;
/// The negative control's statement: the fenced one without `AND fence <= $3`.
const UNFENCED: &str = "UPDATE items SET price_cents = $2, fence = $3 WHERE id = $1";

/// How A writes once B has written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Statement {
    Fenced,
    /// The negative control.
    Unfenced,
}

/// What one trial saw.
struct Trial {
    statement: Statement,
    /// A's write landed over B's.
    stale: bool,
}

struct Setup {
    db: Client,
    a: LockClient,
    b: LockClient,
}

/// A private Redis, a private Postgres with the example's table, and a client of it.
async fn servers() -> (RedisServer, PostgresServer, Client) {
    let redis = RedisServer::start();
    let postgres = block_in_place(PostgresServer::start);
    let db = postgres.connect().await;
    db.batch_execute(CREATE_TABLE).await.unwrap();
    (redis, postgres, db)
}

/// One trial on row `id`.
async fn trial(setup: &Setup, id: i64, statement: Statement) -> Trial {
    let name = format!("fenced_pg_{id}");
    let db = &setup.db;
    db.execute("INSERT INTO items (id, price_cents) VALUES ($1, 0)", &[&id])
        .await
        .unwrap();
    let guard_a = (setup.a.lock(name.as_str()).lease(LEASE).await)
        .unwrap_or_else(|e| panic!("{name}: A's lock: {e}"));
    let token_a = guard_a.fencing_token();
    // A stalls here (a pause, a slow dependency) while its lease runs out and B takes over.
    let guard_b = (setup.b.lock(name.as_str()).wait(LEASE + GENEROUS).await)
        .unwrap_or_else(|e| panic!("{name}: B did not get the lock after A's lease: {e}"));
    let token_b = guard_b.fencing_token();
    assert!(
        token_b > token_a,
        "{name}: B's token {token_b} > A's {token_a}"
    );
    let wrote_b = set_price(db, id, B_PRICE, token_b).await.unwrap();
    assert_eq!(wrote_b, Write::Applied, "{name}: B's write");

    match statement {
        Statement::Fenced => {
            let wrote_a = set_price(db, id, A_PRICE, token_a).await.unwrap();
            assert_eq!(wrote_a, Write::Stale, "{name}: A's stale write is refused");
        }
        Statement::Unfenced => {
            let rows = (db
                .execute(UNFENCED, &[&id, &A_PRICE, &fence(token_a)])
                .await)
                .unwrap();
            assert_eq!(rows, 1, "{name}: the unfenced write matches the row");
        }
    }
    let price: i64 = (db
        .query_one("SELECT price_cents FROM items WHERE id = $1", &[&id])
        .await)
        .unwrap()
        .get(0);
    guard_b.release().await.unwrap();
    drop(guard_a);
    Trial {
        statement,
        stale: price == A_PRICE,
    }
}

/// 60 trials, fenced and unfenced in turn, 30 at a time: no stale write lands fenced, every
/// one lands unfenced (the control fires).
#[tokio::test(flavor = "multi_thread")]
async fn a_stale_holder_cannot_overwrite_a_fenced_postgres_row() {
    let (redis, _postgres, db) = servers().await;
    let setup = Arc::new(Setup {
        db,
        a: LockClient::new(redis.url()).unwrap(),
        b: LockClient::new(redis.url()).unwrap(),
    });
    let trials = run_trials(60, 30, |i| {
        let setup = Arc::clone(&setup);
        let statement = if i % 2 == 0 {
            Statement::Fenced
        } else {
            Statement::Unfenced
        };
        async move { trial(&setup, i as i64, statement).await }
    })
    .await;
    let count = |statement: Statement| {
        let of: Vec<&Trial> = trials.iter().filter(|t| t.statement == statement).collect();
        (of.iter().filter(|t| t.stale).count(), of.len())
    };
    let (fenced_stale, fenced) = count(Statement::Fenced);
    let (unfenced_stale, unfenced) = count(Statement::Unfenced);
    println!(
        "faults::fenced_postgres: stale writes landed fenced {fenced_stale}/{fenced}, \
         unfenced {unfenced_stale}/{unfenced}"
    );
    assert_eq!(fenced_stale, 0, "a fenced stale write landed");
    assert_eq!(
        unfenced_stale, unfenced,
        "the control must see every stale write land"
    );
}

async fn put_price(app: &axum::Router, id: i64, cents: i64, slow_ms: u64) -> (StatusCode, String) {
    let uri = format!("/items/{id}/price?cents={cents}&slow_ms={slow_ms}");
    let request = Request::put(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The example's handler: a request that stalls past its 1 s lease while a later request
/// writes gets `409` and writes nothing; with Postgres gone, `503`. Neither body names a
/// host or a port.
#[tokio::test(flavor = "multi_thread")]
async fn the_example_answers_409_for_a_stale_hold_and_503_without_postgres() {
    let (redis, postgres, db) = servers().await;
    let locks = LockClient::new(redis.url()).unwrap();
    let app = router(locks.clone(), Arc::new(db), LEASE).unwrap();
    let private = [postgres.port().to_string(), redis.port().to_string()];

    // The stalled request must still be asleep when the later one writes: it sleeps 4 s,
    // the later one writes once the 1 s lease ends. Should a loaded machine delay the
    // later one past that, both writes land in token order (checked), and we try again.
    let mut refused = false;
    for id in 1..=3 {
        let seed = (postgres.connect().await)
            .execute("INSERT INTO items (id, price_cents) VALUES ($1, 0)", &[&id])
            .await;
        seed.unwrap();
        let stalled = tokio::spawn({
            let app = app.clone();
            async move { put_price(&app, id, A_PRICE, 4000).await }
        });
        let name = format!("item_{id}");
        let held = async {
            while !locks.inspect(name.as_str()).await.unwrap().is_held() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(GENEROUS, held)
            .await
            .expect("the stalled request holds");
        let (later, body) = put_price(&app, id, B_PRICE, 0).await;
        assert_eq!(later, StatusCode::OK, "{body}");
        let (stale, body) = stalled.await.unwrap();
        let row = price_of(&postgres, id).await;
        assert_eq!(row, B_PRICE, "the later request's price stays");
        if stale == StatusCode::CONFLICT {
            assert!(private.iter().all(|p| !body.contains(p.as_str())), "{body}");
            refused = true;
            break;
        }
        assert_eq!(stale, StatusCode::OK, "{body}");
    }
    assert!(refused, "the stalled request was never refused in 3 tries");

    block_in_place(|| drop(postgres));
    let (down, body) = put_price(&app, 1, 1, 0).await;
    assert_eq!(down, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(private.iter().all(|p| !body.contains(p.as_str())), "{body}");
    assert!(!body.contains("127.0.0.1"), "{body}");
}

async fn price_of(postgres: &PostgresServer, id: i64) -> i64 {
    let db = postgres.connect().await;
    (db.query_one("SELECT price_cents FROM items WHERE id = $1", &[&id])
        .await)
        .unwrap()
        .get(0)
}
