//! E: the same axum route with and without `DistributedLockLayer`, under a loopback
//! HTTP/1.1 keep-alive load generator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use lock_tower::lock::DistributedLockLayer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::report::Results;
use crate::scenarios::{quantile, Sizes};
use crate::server::Admin;

#[derive(Clone, Copy, PartialEq)]
enum Keys {
    Distinct,
    OneKey,
}

async fn serve(router: Router) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, task)
}

/// Reads one response; answers whether it was a 200.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<bool> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .ok()?
        .to_ascii_lowercase();
    let ok = head.starts_with("http/1.1 200");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(ok)
}

/// Drives `conns` keep-alive connections for `secs`; answers (requests/s, latencies µs, errors).
async fn load(
    addr: std::net::SocketAddr,
    conns: usize,
    secs: f64,
    keys: Keys,
) -> (f64, Vec<f64>, u64) {
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(secs);
    let errors = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..conns)
        .map(|c| {
            let errors = Arc::clone(&errors);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut stream = TcpStream::connect(addr).await.expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let mut buf = Vec::new();
                let mut i = 0u64;
                while Instant::now() < end {
                    let id = match keys {
                        Keys::Distinct => format!("{c}-{i}"),
                        Keys::OneKey => "1".to_owned(),
                    };
                    i += 1;
                    let request = format!("GET /items/{id} HTTP/1.1\r\nHost: bench\r\n\r\n");
                    let t = Instant::now();
                    if stream.write_all(request.as_bytes()).await.is_err() {
                        break;
                    }
                    match read_response(&mut stream, &mut buf).await {
                        Some(true) => lat.push(t.elapsed().as_secs_f64() * 1e6),
                        Some(false) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        None => break,
                    }
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("load task"));
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    (all.len() as f64 / secs, all, errors.load(Ordering::Relaxed))
}

/// Loopback round trip to Redis (PING p50, µs).
async fn rtt(admin: &Admin) -> f64 {
    let mut samples = Vec::new();
    for _ in 0..2_000 {
        let t = Instant::now();
        admin.ping().await;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    quantile(&samples, 0.5)
}

/// Runs the five variants once and adds them to `results`.
pub async fn layer(url: &str, admin: &Admin, s: &Sizes, results: &mut Results) {
    let rtt = rtt(admin).await;
    let route = || Router::new().route("/items/{id}", get(|| async { "ok" }));
    let client = lock_core::LockClient::builder(url).build().expect("client");
    let locked = DistributedLockLayer::builder(client)
        .route("/items/{id}")
        .key("item_<id:u64>")
        .build()
        .expect("layer");
    let n = s.e_conns;
    let with = || route().route_layer(locked.clone());
    // Latency overhead is read from the 1-connection rows (no queueing on the cores);
    // throughput from the loaded ones.
    let variants = [
        ("no layer, 1 conn".to_owned(), route(), Keys::Distinct, 1),
        (
            "layer, distinct keys, 1 conn".to_owned(),
            with(),
            Keys::Distinct,
            1,
        ),
        (format!("no layer, {n} conns"), route(), Keys::Distinct, n),
        (
            format!("layer, distinct keys, {n} conns"),
            with(),
            Keys::Distinct,
            n,
        ),
        (
            format!("layer, all on one key, {n} conns"),
            with(),
            Keys::OneKey,
            n,
        ),
    ];
    let mut base_p50 = f64::NAN;
    for (label, router, keys, conns) in variants {
        admin.reset().await;
        let (addr, server) = serve(router).await;
        let (rps, lat, errors) = load(addr, conns, s.e_secs, keys).await;
        let stats = admin.commandstats().await;
        server.abort();
        let p50 = quantile(&lat, 0.5);
        if label.starts_with("no layer") {
            base_p50 = p50;
        }
        let requests = lat.len() as f64 + errors as f64;
        results.add_row(
            'E',
            &label,
            vec![
                ("req/s", rps),
                ("p50 µs", p50),
                ("p99 µs", quantile(&lat, 0.99)),
                ("non-200", errors as f64),
                ("sent cmds/req", stats.sent(false) as f64 / requests),
                ("added p50 in RTTs", (p50 - base_p50) / rtt),
                ("Redis RTT µs", rtt),
            ],
        );
    }
}
