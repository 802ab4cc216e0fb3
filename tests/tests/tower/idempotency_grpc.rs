//! lock-tower's `IdempotencyLayer` on a tonic server: the key from `idempotency-key`
//! metadata, ABORTED for a call in flight, FAILED_PRECONDITION for another message with the
//! key, the stored message replayed. Real gRPC over loopback, real Redis.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use distlock_tests::locks::{self, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::LockInfo;
use lock_tower::idempotency::{IdempotencyLayer, REPLAYED_HEADER};
use tokio::sync::{mpsc, Notify};
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

#[derive(Clone, PartialEq, prost::Message)]
struct Charge {
    #[prost(string, tag = "1")]
    account: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Receipt {
    #[prost(uint64, tag = "1")]
    run: u64,
    #[prost(uint64, tag = "2")]
    token: u64,
}

const CHARGE: &str = "/pay.Payments/Charge";

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `pay.Payments`: `Charge` counts its runs, answers the run number and fencing token; an
/// account named `unavailable` or `invalid` fails with that code; `block` reports entry and
/// waits for the gate.
#[derive(Clone)]
struct Payments {
    runs: Arc<AtomicUsize>,
    gate: Arc<Notify>,
    entered: mpsc::UnboundedSender<()>,
}

impl NamedService for Payments {
    const NAME: &'static str = "pay.Payments";
}

impl tower::Service<axum::http::Request<Body>> for Payments {
    type Response = axum::http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let method = tower::service_fn(move |r| this.clone().charge(r));
            let codec = ProstCodec::<Receipt, Charge>::default();
            Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
        })
    }
}

impl Payments {
    async fn charge(self, request: Request<Charge>) -> Result<Response<Receipt>, Status> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst) as u64 + 1;
        let token = request
            .extensions()
            .get::<LockInfo>()
            .map_or(0, LockInfo::fencing_token);
        match request.into_inner().account.as_str() {
            "unavailable" => Err(Status::unavailable("try later")),
            "invalid" => Err(Status::invalid_argument("no such account")),
            "block" => {
                let _ = self.entered.send(());
                self.gate.notified().await;
                Ok(Response::new(Receipt { run, token }))
            }
            _ => Ok(Response::new(Receipt { run, token })),
        }
    }
}

struct App {
    addr: SocketAddr,
    runs: Arc<AtomicUsize>,
    gate: Arc<Notify>,
    entered: mpsc::UnboundedReceiver<()>,
}

async fn start(url: &str) -> App {
    let (tx, entered) = mpsc::unbounded_channel();
    let service = Payments {
        runs: Arc::default(),
        gate: Arc::default(),
        entered: tx,
    };
    let (runs, gate) = (Arc::clone(&service.runs), Arc::clone(&service.gate));
    let layer = IdempotencyLayer::builder(locks::client(url))
        .require_key()
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Server::builder().layer(layer).add_service(service);
    tokio::spawn(async move {
        router
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("grpc server")
    });
    App {
        addr,
        runs,
        gate,
        entered,
    }
}

async fn connect(addr: SocketAddr) -> tonic::client::Grpc<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    tonic::client::Grpc::new(channel)
}

/// Calls `Charge` for `account` with `key`: the receipt and whether it was replayed.
async fn charge(
    client: &tonic::client::Grpc<Channel>,
    key: Option<&str>,
    account: &str,
) -> Result<(Receipt, bool), Status> {
    let mut client = client.clone();
    let mut request = Request::new(Charge {
        account: account.to_owned(),
    });
    request.set_timeout(Duration::from_secs(60));
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("idempotency-key", key.parse().unwrap());
    }
    client.ready().await.expect("channel ready");
    let response = client
        .unary(
            request,
            PathAndQuery::from_static(CHARGE),
            ProstCodec::<Charge, Receipt>::default(),
        )
        .await?;
    let replayed = response
        .metadata()
        .get(REPLAYED_HEADER)
        .is_some_and(|v| v == "true");
    Ok((response.into_inner(), replayed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_run_once_and_replay_the_stored_message() {
    let server = RedisServer::start();
    let mut app = start(&server.url()).await;
    let client = connect(app.addr).await;
    let (first, replayed) = charge(&client, Some("k1"), "a").await.unwrap();
    assert!(!replayed);
    assert!(first.token > 0, "the handler saw the key's fencing token");
    let (again, replayed) = charge(&client, Some("k1"), "a").await.unwrap();
    assert!(replayed);
    assert_eq!(again, first);
    let other = charge(&client, Some("k1"), "b").await.unwrap_err();
    assert_eq!(other.code(), Code::FailedPrecondition, "{other:?}");
    let missing = charge(&client, None, "a").await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");
    assert_eq!(app.runs.load(Ordering::SeqCst), 1);

    // In flight: ABORTED, without a word about the holder.
    let blocked = {
        let client = client.clone();
        tokio::spawn(async move { charge(&client, Some("k2"), "block").await })
    };
    tokio::time::timeout(GENEROUS, app.entered.recv())
        .await
        .unwrap();
    let busy = charge(&client, Some("k2"), "block").await.unwrap_err();
    assert_eq!(busy.code(), Code::Aborted, "{busy:?}");
    assert!(!busy.message().contains(&std::process::id().to_string()));
    app.gate.notify_one();
    let (done, _) = blocked.await.unwrap().unwrap();
    let (replay, replayed) = charge(&client, Some("k2"), "block").await.unwrap();
    assert!(replayed);
    assert_eq!(replay, done);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);

    // A transient failure is not stored; a client error is, and is replayed.
    for _ in 0..2 {
        let failed = charge(&client, Some("k3"), "unavailable")
            .await
            .unwrap_err();
        assert_eq!(failed.code(), Code::Unavailable);
    }
    assert_eq!(app.runs.load(Ordering::SeqCst), 4);
    for _ in 0..2 {
        let invalid = charge(&client, Some("k4"), "invalid").await.unwrap_err();
        assert_eq!(invalid.code(), Code::InvalidArgument);
        assert_eq!(invalid.message(), "no such account");
    }
    assert_eq!(app.runs.load(Ordering::SeqCst), 5);
}
