//! The Redis an example talks to — the one `REDIS_URL` names, or a private server the
//! example starts — and saying so plainly when there is none. Never a Redis the user did not
//! name, such as one that happens to answer on 6379.

use std::fmt;
use std::time::Duration;

use lock_testkit::{RedisServer, INSTALL_HINT};

/// How long [`check_reachable`] waits for a connection and a `PING` reply.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why an example has no Redis to talk to. Its `Debug` is its message, so a `main` that
/// returns it through `?` prints `Error: cannot reach Redis at …`, not a quoted string.
pub struct NoRedis(String);

impl fmt::Display for NoRedis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NoRedis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoRedis {}

/// The Redis the examples talk to; stops a private server it started when dropped.
#[derive(Debug)]
pub struct ExampleRedis {
    url: String,
    private: Option<RedisServer>,
}

impl ExampleRedis {
    /// `REDIS_URL`, [checked](check_reachable) to answer; never starts a server (for
    /// examples whose processes must share one Redis).
    ///
    /// # Errors
    /// When `REDIS_URL` is unset (saying to set it), or does not answer.
    pub fn from_env() -> Result<Self, NoRedis> {
        let url = env_url().ok_or_else(|| {
            NoRedis(
                "set REDIS_URL to the Redis the instances share (e.g. redis://127.0.0.1:6379), \
                 or run with --demo, which starts a private redis-server"
                    .to_owned(),
            )
        })?;
        check_reachable(&url)?;
        Ok(Self { url, private: None })
    }

    /// `REDIS_URL` if set ([checked](check_reachable) to answer); else a private
    /// `redis-server` started on a free loopback port (stopped at exit). Blocks for at most
    /// a few seconds: call it at start-up.
    ///
    /// # Errors
    /// When `REDIS_URL` does not answer; a message saying how to install redis-server when
    /// none is installed, or why the private server did not start.
    pub fn from_env_or_start() -> Result<Self, NoRedis> {
        if let Some(url) = env_url() {
            check_reachable(&url)?;
            return Ok(Self { url, private: None });
        }
        Self::start_private(&[])
    }

    /// A private `redis-server` on a free loopback port, with `extra` arguments, stopped
    /// when this is dropped; never a server someone else runs. Started by the workspace's
    /// launcher (`lock-testkit`), whose child stays in the terminal's process
    /// group, so a Ctrl-C there stops it with the example (whether or not the example
    /// handles the signal).
    ///
    /// # Errors
    /// A message saying how to install redis-server, or why it did not start.
    pub fn start_private(extra: &[&str]) -> Result<Self, NoRedis> {
        let server = RedisServer::builder()
            .args(extra.iter().copied())
            .try_start_blocking()
            .map_err(|e| {
                NoRedis(if e.is_not_installed() {
                    format!(
                        "no Redis to use (REDIS_URL unset) and redis-server is not \
                         installed.\nTo fix it, {INSTALL_HINT} (or set REDIS_URL), then re-run."
                    )
                } else {
                    format!("cannot start a private redis-server: {e}")
                })
            })?;
        let url = server.url();
        eprintln!("started a private redis-server on {url}");
        Ok(Self {
            url,
            private: Some(server),
        })
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id of a server this started.
    pub fn pid(&self) -> Option<u32> {
        self.private.as_ref().and_then(RedisServer::pid)
    }
}

/// Connects to `url` and sends `PING`, within a few seconds: the one check every example
/// makes before it serves or runs, so that a missing Redis is named as such.
///
/// # Errors
/// `cannot reach Redis at redis://127.0.0.1:6379 (connection refused); set REDIS_URL or
/// start redis-server` — the URL [without its user and password](redacted).
pub fn check_reachable(url: &str) -> Result<(), NoRedis> {
    let shown = redacted(url);
    let client = redis::Client::open(url)
        .map_err(|e| NoRedis(format!("`{shown}` is not a Redis URL ({e}); fix REDIS_URL")))?;
    let answer = client
        .get_connection_with_timeout(PROBE_TIMEOUT)
        .and_then(|mut conn| {
            conn.set_read_timeout(Some(PROBE_TIMEOUT))?;
            redis::cmd("PING").query::<String>(&mut conn)
        });
    match answer {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == redis::ErrorKind::AuthenticationFailed => Err(NoRedis(format!(
            "Redis at {shown} refused us ({e}); put the right user and password in REDIS_URL"
        ))),
        Err(e) => {
            let cause = if e.is_connection_refusal() {
                "connection refused".to_owned()
            } else if e.is_timeout() {
                format!("no answer within {PROBE_TIMEOUT:?}")
            } else {
                e.to_string()
            };
            Err(NoRedis(format!(
                "cannot reach Redis at {shown} ({cause}); set REDIS_URL or start redis-server"
            )))
        }
    }
}

/// `url` without the user and password it may carry, for messages:
/// `redis://app:secret@10.0.0.5:6379/2` → `redis://10.0.0.5:6379/2`.
pub fn redacted(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(mut parsed) => {
            // Only fails for URLs without a host (unix sockets), which have no userinfo.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        // Not a URL redis accepts: show nothing that might be a secret.
        None => match url.rsplit_once('@') {
            Some((_, host)) => format!("…@{host}"),
            None => url.to_owned(),
        },
    }
}

/// `REDIS_URL` when set and not empty.
fn env_url() -> Option<String> {
    std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_drops_user_and_password() {
        let cases = [
            (
                "redis://app:s3cret@10.0.0.5:6379/2",
                "redis://10.0.0.5:6379/2",
            ),
            ("rediss://:s3cret@cache.internal", "rediss://cache.internal"),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("not a url:pw@host", "…@host"),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    /// A closed loopback port: the message names Redis, the URL (without the password)
    /// and what to do, within the probe's bound.
    #[test]
    fn unreachable_redis_is_named_with_a_hint() {
        let port = lock_testkit::free_port();
        let started = std::time::Instant::now();
        let err = check_reachable(&format!("redis://:pw@127.0.0.1:{port}")).unwrap_err();
        assert!(started.elapsed() < PROBE_TIMEOUT * 2);
        assert_eq!(
            err.to_string(),
            format!(
                "cannot reach Redis at redis://127.0.0.1:{port} (connection refused); \
                 set REDIS_URL or start redis-server"
            )
        );
        assert_eq!(
            format!("{err:?}"),
            err.to_string(),
            "main prints it unquoted"
        );
    }

    #[test]
    fn a_running_redis_passes_the_check() {
        let server = RedisServer::start();
        check_reachable(&server.url()).unwrap();
    }
}
