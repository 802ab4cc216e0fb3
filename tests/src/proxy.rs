//! [`TcpProxy`]: an in-test TCP proxy on a free loopback port that injects
//! network faults between a client and a Redis server.

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// Settings every connection task watches, so changes apply to live connections.
#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    latency: Duration,
    blackhole: bool,
}

/// State shared between the [`TcpProxy`] handle and its tasks.
#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    settings: watch::Sender<Settings>,
    refuse: AtomicBool,
    drop_next_reply: AtomicBool,
    /// Replies discarded by [`TcpProxy::drop_next_reply`]'s fault so far.
    dropped_replies: AtomicU64,
    next_id: AtomicU64,
    /// Live connections; aborting a task closes both of its sockets.
    conns: Mutex<HashMap<u64, AbortHandle>>,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, AbortHandle>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A loopback TCP proxy forwarding to `target`, with fault controls that act
/// on live connections. Dropping it closes the listener and all connections.
///
/// Create it inside a Tokio runtime (e.g. a `#[tokio::test]`): its tasks run there.
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl TcpProxy {
    /// Starts a proxy on `127.0.0.1:<free port>` forwarding to `target`.
    ///
    /// # Panics
    /// Outside a Tokio runtime, or if no loopback port can be bound.
    pub fn start(target: SocketAddr) -> TcpProxy {
        let std_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("binding a loopback port for the proxy");
        std_listener
            .set_nonblocking(true)
            .expect("making the proxy listener non-blocking");
        let listener = TcpListener::from_std(std_listener)
            .expect("TcpProxy::start must run inside a Tokio runtime");
        let addr = listener.local_addr().expect("proxy listener address");
        let shared = Arc::new(Shared {
            target,
            settings: watch::Sender::new(Settings::default()),
            refuse: AtomicBool::new(false),
            drop_next_reply: AtomicBool::new(false),
            dropped_replies: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        TcpProxy {
            addr,
            shared,
            accept_task,
        }
    }

    /// The proxy's own address (`127.0.0.1:port`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The address traffic is forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Number of client connections currently open through the proxy.
    pub fn connection_count(&self) -> usize {
        self.shared.conns().len()
    }

    /// Delays every chunk by `latency` in each direction (so a request/reply
    /// round trip takes at least twice that). `Duration::ZERO` turns it off.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.settings.send_modify(|s| s.latency = latency);
    }

    /// While on, nothing is forwarded in either direction and new connections
    /// are accepted but not forwarded, so clients hang (a network partition).
    ///
    /// Bytes are held, not lost: turning it off delivers them, like a healed
    /// partition with TCP retransmits, so protocol streams stay in sync. Call
    /// [`Self::cut_all`] too to model a partition that also kills connections.
    pub fn blackhole(&self, on: bool) {
        self.shared.settings.send_modify(|s| s.blackhole = on);
    }

    /// While on, new connections are accepted and closed at once (the client
    /// sees EOF / reset). Existing connections are unaffected.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Closes every current connection now (both sides). New ones still work.
    pub fn cut_all(&self) {
        let conns = std::mem::take(&mut *self.shared.conns());
        for task in conns.into_values() {
            task.abort();
        }
    }

    /// Arms a one-shot fault: the next server→client chunk on any connection
    /// is discarded and that connection is then cut. Models "the command ran
    /// on Redis but its reply was lost". Arm it after connecting (connection
    /// setup has replies too) and when only the connection under test is busy.
    pub fn drop_next_reply(&self) {
        self.shared.drop_next_reply.store(true, Ordering::SeqCst);
    }

    /// How many replies [`drop_next_reply`](Self::drop_next_reply)'s fault discarded: what a
    /// test asserts to know that its fault fired.
    pub fn dropped_replies(&self) -> u64 {
        self.shared.dropped_replies.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.cut_all();
    }
}

impl fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpProxy")
            .field("addr", &self.addr)
            .field("target", &self.shared.target)
            .field("settings", &*self.shared.settings.borrow())
            .field("connections", &self.connection_count())
            .finish()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Ends only when the proxy is dropped (the task is aborted).
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.refuse.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        // Register under the lock so the task can't deregister before it's registered.
        let mut conns = shared.conns();
        let task = tokio::spawn(serve(id, client, Arc::clone(&shared)));
        conns.insert(id, task.abort_handle());
    }
}

/// Removes a connection from the live set when its task ends or is aborted.
struct Registration {
    id: u64,
    shared: Arc<Shared>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.conns().remove(&self.id);
    }
}

async fn serve(id: u64, client: TcpStream, shared: Arc<Shared>) {
    let _registration = Registration {
        id,
        shared: Arc::clone(&shared),
    };
    let mut settings = shared.settings.subscribe();
    // A blackholed proxy doesn't even reach the server.
    if !wait_open(&mut settings).await {
        return;
    }
    let Ok(server) = TcpStream::connect(shared.target).await else {
        return; // dropping `client` closes it: the server is unreachable
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Whichever direction ends first (EOF, error, drop_next_reply) ends both.
    tokio::select! {
        _ = pump(client_read, server_write, false, &shared) => {}
        _ = pump(server_read, client_write, true, &shared) => {}
    }
}

/// Copies chunks `from` → `to`, applying the current settings to each chunk.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, to_client: bool, shared: &Shared) {
    let mut settings = shared.settings.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !wait_open(&mut settings).await {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let latency = settings.borrow().latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        // A blackhole switched on while this chunk was in flight holds it too.
        if !wait_open(&mut settings).await {
            return;
        }
        if to_client && shared.drop_next_reply.swap(false, Ordering::SeqCst) {
            shared.dropped_replies.fetch_add(1, Ordering::SeqCst);
            return; // discard the chunk and cut the connection
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits while the proxy is blackholed. False if the proxy is gone.
async fn wait_open(settings: &mut watch::Receiver<Settings>) -> bool {
    settings.wait_for(|s| !s.blackhole).await.is_ok()
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
