//! Finding or starting the Redis an example talks to.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Redis the examples talk to; stops a private server it started when dropped.
#[derive(Debug)]
pub struct ExampleRedis {
    url: String,
    child: Option<Child>,
}

impl ExampleRedis {
    /// `REDIS_URL` if set; else a Redis answering on 127.0.0.1:6379; else a private
    /// `redis-server` started on a free loopback port (stopped at exit).
    ///
    /// # Errors
    /// A message saying how to install redis-server when none can be found or started.
    pub fn find_or_start() -> Result<Self, String> {
        if let Some(url) = std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()) {
            return Ok(Self { url, child: None });
        }
        let default = SocketAddr::from((Ipv4Addr::LOCALHOST, 6379));
        if TcpStream::connect_timeout(&default, Duration::from_millis(200)).is_ok() {
            return Ok(Self {
                url: "redis://127.0.0.1:6379".to_owned(),
                child: None,
            });
        }
        Self::start_private(&[])
    }

    /// A private `redis-server` on a free loopback port, with `extra` arguments, stopped
    /// when this is dropped; never a server someone else runs.
    ///
    /// # Errors
    /// A message saying how to install redis-server, or that it did not start.
    pub fn start_private(extra: &[&str]) -> Result<Self, String> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|_| {
                "no Redis found (REDIS_URL unset, nothing on 127.0.0.1:6379) and redis-server \
                 is not installed.\nInstall it, e.g. `sudo apt-get install redis-server` \
                 (Debian/Ubuntu), `sudo dnf install redis` (Fedora) or `brew install redis` \
                 (macOS), then re-run."
                    .to_owned()
            })?;
        let redis = Self {
            url: format!("redis://127.0.0.1:{port}"),
            child: Some(child),
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {port} did not start"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("started a private redis-server on {}", redis.url);
        Ok(redis)
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id of a server this started.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for ExampleRedis {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
