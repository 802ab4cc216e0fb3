//! Finding or starting the Redis an example talks to.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
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
    /// `REDIS_URL` if set; else a Redis answering `PING` without a password on
    /// 127.0.0.1:6379; else a private `redis-server` started on a free loopback port
    /// (stopped at exit). When something else listens on 6379 (a Redis that wants a
    /// password, another program), a one-line note on stderr says why it is not used.
    ///
    /// # Errors
    /// A message saying how to install redis-server when none is installed, or why the
    /// private server did not start.
    pub fn find_or_start() -> Result<Self, String> {
        if let Some(url) = std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()) {
            return Ok(Self { url, child: None });
        }
        let default = SocketAddr::from((Ipv4Addr::LOCALHOST, 6379));
        match ping(default) {
            Ping::Pong => {
                return Ok(Self {
                    url: "redis://127.0.0.1:6379".to_owned(),
                    child: None,
                })
            }
            Ping::NoListener => {}
            Ping::Other(why) => {
                eprintln!("127.0.0.1:6379 {why}: starting a private redis-server instead");
            }
        }
        Self::start_private(&[])
    }

    /// A private `redis-server` on a free loopback port, with `extra` arguments, stopped
    /// when this is dropped; never a server someone else runs. It stays in the terminal's
    /// process group, so a Ctrl-C there stops it with the example (whether or not the
    /// example handles the signal).
    ///
    /// # Errors
    /// A message saying how to install redis-server, or why it did not start.
    pub fn start_private(extra: &[&str]) -> Result<Self, String> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null());
        let child = command.spawn().map_err(|e| match e.kind() {
            ErrorKind::NotFound => "no Redis to use (REDIS_URL unset, no Redis without a \
                 password on 127.0.0.1:6379) and redis-server is not installed.\nInstall it, \
                 e.g. `sudo apt-get install redis-server` (Debian/Ubuntu), `sudo dnf install \
                 redis` (Fedora) or `brew install redis` (macOS), then re-run."
                .to_owned(),
            _ => format!("cannot run redis-server: {e}"),
        })?;
        let mut redis = Self {
            url: format!("redis://127.0.0.1:{port}"),
            child: Some(child),
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while ping(addr) != Ping::Pong {
            if let Some(status) = redis.child.as_mut().and_then(|c| c.try_wait().ok()?) {
                return Err(format!(
                    "redis-server on port {port} exited at start: {status}"
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {port} did not start in 10 s"));
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

/// What answered a `PING` on an address.
#[derive(Debug, PartialEq, Eq)]
enum Ping {
    /// A Redis that serves this client without a password.
    Pong,
    /// Nothing accepts connections there.
    NoListener,
    /// Something listens, but is no Redis we can use; says what.
    Other(String),
}

/// Sends an inline `PING` to `addr` and reads the first line of the answer.
fn ping(addr: SocketAddr) -> Ping {
    let timeout = Duration::from_millis(500);
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout / 2) else {
        return Ping::NoListener;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    if stream.write_all(b"PING\r\n").is_err() {
        return Ping::Other("accepts connections but not a PING".to_owned());
    }
    let mut line = String::new();
    let read = BufReader::new(stream.take(256)).read_line(&mut line);
    let line = line.trim_end();
    match read {
        Ok(0) => Ping::Other("closes the connection on PING".to_owned()),
        Ok(_) if line == "+PONG" => Ping::Pong,
        Ok(_) if line.starts_with("-NOAUTH") || line.starts_with("-WRONGPASS") => {
            Ping::Other("is a Redis that requires a password".to_owned())
        }
        Ok(_) if line.starts_with('-') => Ping::Other(format!("answers PING with `{line}`")),
        Ok(_) => Ping::Other("answers, but not as Redis".to_owned()),
        Err(_) => Ping::Other("accepts connections but does not answer PING".to_owned()),
    }
}
