//! `lock-tower` on a tonic server: `orders.Orders/PlaceOrder` runs one call at a time per
//! customer (the `x-customer-id` metadata), across every instance of the server, so a
//! client that retries a slow call cannot place the order twice concurrently.
//! `GetOrder` reads an order placed before and is not locked. (Orders are kept in the
//! process's memory: enough for a demo, not for several instances.)
//!
//! Uses `REDIS_URL` if set, else starts a private `redis-server` on a free loopback port
//! (stopped at exit); never a Redis it merely finds on 6379. Several servers exclude each
//! other's calls only through one Redis: give them the same `REDIS_URL` (and each its
//! `PORT`). The protobuf types and service glue are written by hand after
//! `tests/proto/orders.proto`, so no `protoc` is needed.
//!
//! ```sh
//! # Concurrent calls, reading an order back, a busy customer and a missing metadata,
//! # then exit:
//! cargo run -p distlock-examples --example tonic_orders -- --demo
//!
//! # Or serve on 127.0.0.1:50051 (PORT changes it) and call it with grpcurl:
//! cargo run -p distlock-examples --example tonic_orders
//! grpcurl -plaintext -import-path tests/proto -proto orders.proto \
//!   -H 'x-customer-id: 42' -d '{"sku": "book", "quantity": 1}' \
//!   127.0.0.1:50051 orders.Orders/PlaceOrder
//! # → {"fencingToken": "…", "orderId": "1"}. Two at once for one customer: the second
//! #   waits for the first (each takes 1 s). Without the metadata: ERROR Code:
//! #   InvalidArgument, "key parameter `header.x-customer-id` is missing".
//! grpcurl -plaintext -import-path tests/proto -proto orders.proto \
//!   -d '{"order_id": 1}' 127.0.0.1:50051 orders.Orders/GetOrder
//! # → the order (sku, quantity, customer, fencing token); no metadata needed, never
//! #   waits for a lock. An unknown id: ERROR Code: NotFound.
//! ```

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::uri::PathAndQuery;
use distlock_examples::ExampleRedis;
use lock_core::{LockClient, LockInfo};
use lock_tower::lock::DistributedLockLayer;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

// -- orders.proto, by hand --------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
struct PlaceOrderRequest {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(uint32, tag = "2")]
    quantity: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PlaceOrderReply {
    #[prost(uint64, tag = "1")]
    fencing_token: u64,
    #[prost(uint64, tag = "2")]
    order_id: u64,
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
    #[prost(string, tag = "2")]
    sku: String,
    #[prost(uint32, tag = "3")]
    quantity: u32,
    #[prost(string, tag = "4")]
    customer_id: String,
    #[prost(uint64, tag = "5")]
    fencing_token: u64,
}

const PLACE_ORDER: &str = "/orders.Orders/PlaceOrder";
const GET_ORDER: &str = "/orders.Orders/GetOrder";

// -- the service ------------------------------------------------------------------------------

/// The orders service. `PlaceOrder` takes a while (say, charging a card).
#[derive(Clone, Default)]
struct Orders {
    next_id: Arc<AtomicU64>,
    placed: Arc<Mutex<HashMap<u64, Order>>>,
}

impl Orders {
    async fn place_order(
        self,
        request: Request<PlaceOrderRequest>,
    ) -> Result<Response<PlaceOrderReply>, Status> {
        // Put there by the layer: the lock's name and fencing token.
        let lock = request.extensions().get::<LockInfo>().cloned();
        let customer_id = (request.metadata().get("x-customer-id"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let order = request.into_inner();
        if order.quantity == 0 {
            return Err(Status::invalid_argument("quantity must be at least 1"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let order = Order {
            order_id: self.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            sku: order.sku,
            quantity: order.quantity,
            customer_id,
            fencing_token: lock.map_or(0, |l| l.fencing_token()),
        };
        let reply = PlaceOrderReply {
            fencing_token: order.fencing_token,
            order_id: order.order_id,
        };
        self.placed.lock().unwrap().insert(order.order_id, order);
        Ok(Response::new(reply))
    }

    async fn get_order(self, request: Request<GetOrderRequest>) -> Result<Response<Order>, Status> {
        let id = request.into_inner().order_id;
        let order = self.placed.lock().unwrap().get(&id).cloned();
        order
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no order {id}")))
    }
}

/// What `tonic-prost-build` would generate: routes the methods, decodes and encodes.
#[derive(Clone, Default)]
struct OrdersServer {
    orders: Orders,
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
        let orders = self.orders.clone();
        match request.uri().path() {
            PLACE_ORDER => Box::pin(async move {
                let method = tower::service_fn(move |r| orders.clone().place_order(r));
                let codec = ProstCodec::<PlaceOrderReply, PlaceOrderRequest>::default();
                Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
            }),
            GET_ORDER => Box::pin(async move {
                let method = tower::service_fn(move |r| orders.clone().get_order(r));
                let codec = ProstCodec::<Order, GetOrderRequest>::default();
                Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// Serves the orders service behind the lock layer.
async fn serve(locks: LockClient, listener: tokio::net::TcpListener) -> Result<(), BoxError> {
    let lock = DistributedLockLayer::builder(locks)
        .route(PLACE_ORDER) // only this method is locked
        .key("customer_<header.x-customer-id:u64>")
        .wait(Duration::from_secs(5))
        .build()?;
    Server::builder()
        .layer(lock)
        .add_service(OrdersServer::default())
        .serve_with_incoming(TcpIncoming::from(listener))
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let redis = ExampleRedis::from_env_or_start()?;
    let url = distlock_examples::redacted(redis.url());
    let demo = std::env::args().any(|a| a == "--demo");
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port.parse()?,
        Err(_) if demo => 0,
        Err(_) => 50051,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let locks = LockClient::new(redis.url())?;
    if !demo {
        println!("orders.Orders on {addr} (Redis {url}); Ctrl-C to stop");
        return serve(locks, listener).await;
    }
    tokio::spawn(serve(locks.clone(), listener));
    run_demo(addr, &locks).await
}

// -- the demo client ----------------------------------------------------------------------------

async fn place_order(channel: Channel, customer: Option<&str>) -> Result<PlaceOrderReply, Status> {
    let mut client = tonic::client::Grpc::new(channel);
    let mut request = Request::new(PlaceOrderRequest {
        sku: "book".into(),
        quantity: 1,
    });
    if let Some(customer) = customer {
        let value = customer
            .parse()
            .map_err(|_| Status::invalid_argument("customer id"))?;
        request.metadata_mut().insert("x-customer-id", value);
    }
    client
        .ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let codec = ProstCodec::<PlaceOrderRequest, PlaceOrderReply>::default();
    let reply = client
        .unary(request, PathAndQuery::from_static(PLACE_ORDER), codec)
        .await?;
    Ok(reply.into_inner())
}

async fn get_order(channel: Channel, order_id: u64) -> Result<Order, Status> {
    let mut client = tonic::client::Grpc::new(channel);
    client
        .ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let codec = ProstCodec::<GetOrderRequest, Order>::default();
    let request = Request::new(GetOrderRequest { order_id });
    let reply = client
        .unary(request, PathAndQuery::from_static(GET_ORDER), codec)
        .await?;
    Ok(reply.into_inner())
}

async fn run_demo(addr: SocketAddr, locks: &LockClient) -> Result<(), BoxError> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;

    println!("3 concurrent orders for customer 42 (each takes 1 s):");
    let start = Instant::now();
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let channel = channel.clone();
            tokio::spawn(async move {
                let reply = place_order(channel, Some("42")).await;
                (start.elapsed(), reply)
            })
        })
        .collect();
    for call in calls {
        let (at, reply) = call.await?;
        let reply = reply?;
        println!(
            "  order {} done after {at:.1?}, fencing token {}",
            reply.order_id, reply.fencing_token
        );
    }

    println!("GetOrder is not locked: order 1 is read at once while customer 42 is busy:");
    let held = locks.lock("customer_42").await?;
    let order = get_order(channel.clone(), 1).await?;
    println!(
        "  order {}: {} x {} for customer {}, placed under fencing token {}",
        order.order_id, order.quantity, order.sku, order.customer_id, order.fencing_token
    );
    held.release().await?;

    println!("customer 7 is busy elsewhere (a lock held for 8 s, beyond the 5 s wait):");
    let held = locks
        .lock("customer_7")
        .lease(Duration::from_secs(8))
        .await?;
    match place_order(channel.clone(), Some("7")).await {
        Err(status) => println!("  {:?}: {}", status.code(), status.message()),
        Ok(reply) => println!("  unexpected success: {reply:?}"),
    }
    held.release().await?;

    println!("no x-customer-id metadata:");
    match place_order(channel, None).await {
        Err(status) => println!("  {:?}: {}", status.code(), status.message()),
        Ok(reply) => println!("  unexpected success: {reply:?}"),
    }
    Ok(())
}
