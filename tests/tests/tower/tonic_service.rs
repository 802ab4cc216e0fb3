//! lock-tower with tonic: a real gRPC server and client over loopback, real Redis.
//!
//! The protobuf messages and the service glue are written by hand, matching
//! `tests/proto/orders.proto` (what `tonic-prost-build` would generate), so no `protoc` is
//! needed.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use distlock_tests::locks::{self, OverlapDetector};
use distlock_tests::RedisServer;
use lock_core::{LockClient, LockInfo};
use lock_tower::lock::DistributedLockLayer;
use lock_tower::semaphore::DistributedSemaphoreLayer;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

// ---------------------------------------------------------------------------------------------
// tests/proto/orders.proto, by hand (only the fields the tests use).

#[derive(Clone, PartialEq, prost::Message)]
struct PlaceOrderRequest {
    #[prost(string, tag = "1")]
    sku: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PlaceOrderReply {
    #[prost(uint64, tag = "1")]
    fencing_token: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GetOrderRequest {
    #[prost(uint64, tag = "1")]
    order_id: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Order {
    #[prost(uint64, tag = "1")]
    order_id: u64,
}

const PLACE_ORDER: &str = "/orders.Orders/PlaceOrder";
const GET_ORDER: &str = "/orders.Orders/GetOrder";

type Handler = Arc<
    dyn Fn(Request<PlaceOrderRequest>) -> BoxFuture<Result<Response<PlaceOrderReply>, Status>>
        + Send
        + Sync,
>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The server side of `orders.Orders`: `PlaceOrder` calls `handler`; `GetOrder` echoes the
/// id, and fails if it ran under a lock.
#[derive(Clone)]
struct OrdersServer {
    handler: Handler,
}

impl NamedService for OrdersServer {
    const NAME: &'static str = "orders.Orders";
}

impl tower::Service<axum::http::Request<Body>> for OrdersServer {
    type Response = axum::http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<Body>) -> Self::Future {
        let handler = Arc::clone(&self.handler);
        match request.uri().path() {
            PLACE_ORDER => Box::pin(async move {
                let method = tower::service_fn(move |r| handler(r));
                let codec = ProstCodec::<PlaceOrderReply, PlaceOrderRequest>::default();
                Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
            }),
            GET_ORDER => Box::pin(async move {
                let method = tower::service_fn(get_order);
                let codec = ProstCodec::<Order, GetOrderRequest>::default();
                Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

async fn get_order(request: Request<GetOrderRequest>) -> Result<Response<Order>, Status> {
    if let Some(lock) = request.extensions().get::<LockInfo>() {
        return Err(Status::internal(format!(
            "GetOrder ran under {}",
            lock.name()
        )));
    }
    Ok(Response::new(Order {
        order_id: request.into_inner().order_id,
    }))
}

/// Serves `handler` behind `layer` on a free loopback port.
async fn serve(layer: DistributedLockLayer, handler: Handler) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Server::builder()
        .layer(layer)
        .add_service(OrdersServer { handler });
    tokio::spawn(async move {
        router
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("grpc server")
    });
    addr
}

async fn connect(addr: SocketAddr) -> tonic::client::Grpc<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    tonic::client::Grpc::new(channel)
}

/// Calls `PlaceOrder` with the metadata `x-order-id: order_id` (none for `None`).
async fn call(
    client: &tonic::client::Grpc<Channel>,
    order_id: Option<&str>,
) -> Result<PlaceOrderReply, Status> {
    let message = PlaceOrderRequest {
        sku: "sku-1".into(),
    };
    unary(client, PLACE_ORDER, message, order_id).await
}

/// Calls `method` with `message` and the metadata `x-order-id: order_id` (none for `None`).
async fn unary<Req, Reply>(
    client: &tonic::client::Grpc<Channel>,
    method: &'static str,
    message: Req,
    order_id: Option<&str>,
) -> Result<Reply, Status>
where
    Req: prost::Message + Send + 'static,
    Reply: prost::Message + Default + Send + 'static,
{
    let mut client = client.clone();
    let mut request = Request::new(message);
    request.set_timeout(Duration::from_secs(60));
    if let Some(id) = order_id {
        request
            .metadata_mut()
            .insert("x-order-id", id.parse().unwrap());
    }
    client.ready().await.expect("channel ready");
    client
        .unary(
            request,
            PathAndQuery::from_static(method),
            ProstCodec::<Req, Reply>::default(),
        )
        .await
        .map(Response::into_inner)
}

/// Locks `PlaceOrder` per `x-order-id` metadata; `GetOrder` is not locked.
fn order_layer(client: LockClient, wait: Duration) -> DistributedLockLayer {
    DistributedLockLayer::builder(client)
        .route(PLACE_ORDER)
        .key("order_<header.x-order-id:u64>")
        .wait(wait)
        .build()
        .unwrap()
}

/// A handler answering the fencing token the layer put into the request extensions.
fn token_handler() -> Handler {
    Arc::new(|request: Request<PlaceOrderRequest>| {
        let token = request
            .extensions()
            .get::<LockInfo>()
            .map_or(0, LockInfo::fencing_token);
        Box::pin(async move {
            Ok(Response::new(PlaceOrderReply {
                fencing_token: token,
            }))
        })
    })
}

// ---------------------------------------------------------------------------------------------

/// Concurrent calls for one order id run one at a time, each with a new fencing token.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_for_one_order_serialize() {
    let server = RedisServer::start();
    let detector = Arc::new(OverlapDetector::default());
    let seen = Arc::clone(&detector);
    let handler: Handler = Arc::new(move |request: Request<PlaceOrderRequest>| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            seen.enter();
            // Room for an overlap, were there no lock.
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            seen.exit();
            let info = request.extensions().get::<LockInfo>().expect("lock info");
            Ok(Response::new(PlaceOrderReply {
                fencing_token: info.fencing_token(),
            }))
        })
    });
    let addr = serve(
        order_layer(locks::client(&server.url()), Duration::from_secs(60)),
        handler,
    )
    .await;
    let client = connect(addr).await;
    let calls: Vec<_> = (0..30)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { call(&client, Some("42")).await })
        })
        .collect();
    let mut tokens = Vec::new();
    for c in calls {
        tokens.push(c.await.unwrap().expect("call succeeds").fencing_token);
    }
    assert_eq!(detector.overlaps(), 0, "calls overlapped");
    assert_eq!(detector.entries(), 30);
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 30, "every hold has its own fencing token");
}

/// A busy order answers ABORTED with a message that names the lock's family, never its
/// holder; the unlocked method still works meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_order_answers_aborted() {
    let server = RedisServer::start();
    let holder = locks::builder(&server.url())
        .service_name("billing-svc")
        .holder_host("web-3.internal")
        .build()
        .unwrap();
    let guard = holder
        .lock("order_42")
        .request_id("req-secret-42")
        .await
        .unwrap();
    let addr = serve(
        order_layer(locks::client(&server.url()), Duration::from_millis(200)),
        token_handler(),
    )
    .await;
    let client = connect(addr).await;
    let status = call(&client, Some("42")).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert_eq!(
        status.message(),
        "lock `order_<header.x-order-id:u64>` is busy",
        "{status:?}"
    );
    let pid = std::process::id().to_string();
    for secret in [
        "billing-svc",
        "web-3.internal",
        "req-secret-42",
        pid.as_str(),
    ] {
        let metadata = format!("{:?}", status.metadata());
        assert!(!metadata.contains(secret), "{secret} in {metadata}");
    }
    assert!(call(&client, Some("43")).await.is_ok());
    let message = GetOrderRequest { order_id: 42 };
    let order: Order = unary(&client, GET_ORDER, message, Some("42"))
        .await
        .expect("GetOrder is not locked");
    assert_eq!(order.order_id, 42);
    guard.release().await.unwrap();
    assert!(call(&client, Some("42")).await.unwrap().fencing_token > 0);
}

/// Typed metadata: every spelling of order 42 that `u64` parses (`042`, `+42`, `0042`)
/// meets the hold of `order_42` (ABORTED), and one it rejects is INVALID_ARGUMENT before
/// any lock attempt — the layer locks the value the method reads, not the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_spellings_of_one_order_meet_its_hold() {
    let server = RedisServer::start();
    let holder = locks::client(&server.url());
    let guard = holder.lock("order_42").await.unwrap();
    let addr = serve(
        order_layer(locks::client(&server.url()), Duration::from_millis(150)),
        token_handler(),
    )
    .await;
    let client = connect(addr).await;
    for spelling in ["42", "042", "+42", "0042"] {
        let status = call(&client, Some(spelling)).await.unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{spelling}: {status:?}");
    }
    let status = call(&client, Some("4x2")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        status.message(),
        "key parameter `header.x-order-id` is not a valid u64"
    );
    guard.release().await.unwrap();
    assert!(call(&client, Some("+42")).await.is_ok());
}

/// Missing metadata answers INVALID_ARGUMENT naming it, before any lock attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_metadata_answers_invalid_argument() {
    let server = RedisServer::start();
    let addr = serve(
        order_layer(locks::client(&server.url()), Duration::ZERO),
        token_handler(),
    )
    .await;
    let client = connect(addr).await;
    let status = call(&client, None).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        status.message(),
        "key parameter `header.x-order-id` is missing"
    );
    let mut redis = server.conn().await;
    let keys: Vec<String> = redis::AsyncCommands::keys(&mut redis, "*").await.unwrap();
    assert!(keys.is_empty(), "no lock may be attempted: {keys:?}");
}

/// With Redis down, a locked method answers UNAVAILABLE (fail closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_unavailable() {
    let mut server = RedisServer::start();
    let client = locks::builder(&server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let addr = serve(
        order_layer(client, Duration::from_millis(500)),
        token_handler(),
    )
    .await;
    let grpc = connect(addr).await;
    assert!(call(&grpc, Some("1")).await.is_ok());
    server.kill();
    let status = call(&grpc, Some("1")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}

/// A call outliving its explicit lease is dropped and answered ABORTED (on-lost abort).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_lock_answers_aborted() {
    let server = RedisServer::start();
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .route(PLACE_ORDER)
        .key("order_<header.x-order-id:u64>")
        .lease(Duration::from_millis(500))
        .build()
        .unwrap();
    // Work that outlives the lease many times over.
    let handler: Handler = Arc::new(|_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(Response::new(PlaceOrderReply { fencing_token: 0 }))
        })
    });
    let client = connect(serve(layer, handler).await).await;
    let status = call(&client, Some("42")).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(status.message().contains("lost"), "{status:?}");
}

/// The semaphore layer over gRPC: a call that gets no permit within the wait is answered
/// `RESOURCE_EXHAUSTED`, with a message naming only the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_semaphore_answers_resource_exhausted() {
    let server = RedisServer::start();
    let layer = DistributedSemaphoreLayer::builder(locks::client(&server.url()), 1)
        .route(PLACE_ORDER)
        .key("orders_<header.x-order-id:u64>")
        .wait(Duration::from_millis(200))
        .build()
        .unwrap();
    let (started, release) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let handler: Handler = {
        let (started, release) = (Arc::clone(&started), Arc::clone(&release));
        Arc::new(move |_: Request<PlaceOrderRequest>| {
            let (started, release) = (Arc::clone(&started), Arc::clone(&release));
            Box::pin(async move {
                started.notify_one();
                release.notified().await;
                Ok(Response::new(PlaceOrderReply { fencing_token: 1 }))
            })
        })
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Server::builder()
        .layer(layer)
        .add_service(OrdersServer { handler });
    tokio::spawn(async move {
        router
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("grpc server")
    });
    let client = connect(addr).await;
    let first = tokio::spawn({
        let client = client.clone();
        async move { call(&client, Some("7")).await }
    });
    started.notified().await;
    let status = call(&client, Some("7")).await.expect_err("no permit left");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.message(),
        "limit `orders_<header.x-order-id:u64>` is reached"
    );
    release.notify_one();
    assert!(first.await.unwrap().is_ok());
}
