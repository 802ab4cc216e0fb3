//! A small HTTP/1.1 load generator: keep-alive connections spread over the instances.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use indicatif::ProgressBar;

use super::{Error, Settings};

/// What the load produced.
#[derive(Debug, Default)]
pub(crate) struct Load {
    /// Answers by HTTP status (0: the request failed without an answer).
    pub(crate) statuses: BTreeMap<u16, usize>,
    pub(crate) latencies: Vec<Duration>,
    pub(crate) elapsed: Duration,
}

/// Fires `settings.requests` POSTs to `path` with `settings.concurrency` connections, worker
/// `w` talking to instance `w % addrs.len()`.
pub(crate) async fn fire(
    addrs: &[SocketAddr],
    path: &str,
    settings: &Settings,
    progress: Option<ProgressBar>,
) -> Load {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..settings.concurrency.max(1))
        .map(|w| {
            let (next, progress) = (Arc::clone(&next), progress.clone());
            let (addr, path, total) = (addrs[w % addrs.len()], path.to_owned(), settings.requests);
            tokio::spawn(async move { worker(addr, &path, &next, total, progress.as_ref()).await })
        })
        .collect();
    let mut load = Load::default();
    for worker in workers {
        if let Ok(part) = worker.await {
            for (status, n) in part.statuses {
                *load.statuses.entry(status).or_default() += n;
            }
            load.latencies.extend(part.latencies);
        }
    }
    load.elapsed = started.elapsed();
    if let Some(progress) = progress {
        progress.finish_and_clear();
    }
    load
}

async fn worker(
    addr: SocketAddr,
    path: &str,
    next: &AtomicUsize,
    total: usize,
    progress: Option<&ProgressBar>,
) -> Load {
    let mut load = Load::default();
    let mut sender: Option<SendRequest<Empty<Bytes>>> = None;
    while next.fetch_add(1, Ordering::Relaxed) < total {
        let started = Instant::now();
        let status = match send(&mut sender, addr, path).await {
            Ok(status) => status,
            Err(_) => {
                sender = None; // reconnect for the next request
                0
            }
        };
        load.latencies.push(started.elapsed());
        *load.statuses.entry(status).or_default() += 1;
        if let Some(progress) = progress {
            progress.inc(1);
        }
    }
    load
}

async fn send(
    sender: &mut Option<SendRequest<Empty<Bytes>>>,
    addr: SocketAddr,
    path: &str,
) -> Result<u16, Error> {
    if sender.is_none() {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        *sender = Some(send);
    }
    let send = sender.as_mut().expect("connected above");
    send.ready().await?;
    let request = Request::post(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let response = send.send_request(request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}
