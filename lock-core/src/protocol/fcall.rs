//! One call of a library function, typed with its reply, and loading the library where a
//! call finds it missing — as `redis::Script` loads a script on `NOSCRIPT`.
//!
//! Nothing on the hot path asks whether the library is loaded: a call is one `FCALL`. Only
//! a call that meets `Function not found` (a new server, a server restarted without data, a
//! new Cluster master after resharding, each Redlock node at first use) loads the library
//! where the call went and sends it once more; calls that meet it missing together share
//! one load. Functions replicate and persist with the data, so a promoted replica answers
//! without a load.

use std::marker::PhantomData;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::{Cmd, FromRedisValue, RedisError, RedisWrite as _};

use crate::error::{bounded, Failure, LockError};
use crate::protocol::library::{Function, CLUSTER_SUFFIX, LIBRARY};
use crate::protocol::name::LockName;
use crate::transport::backend::Conn;

/// One function call whose answer reads as `R`: the `FCALL` command, built once with its
/// exact size, and sent as it is to every node and on every retry.
#[derive(Debug)]
pub(crate) struct Call<R> {
    cmd: Cmd,
    function: Function,
    reply: PhantomData<fn() -> R>,
}

/// One argument of a call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Str(&'a str),
    Bytes(&'a [u8]),
    Int(u64),
}

impl Arg<'_> {
    /// Bytes the argument takes at most (a `u64` has at most 20 digits).
    fn room(&self) -> usize {
        match self {
            Self::Str(s) => s.len(),
            Self::Bytes(b) => b.len(),
            Self::Int(_) => 20,
        }
    }
}

/// Room for the words before the keys: the command, the function's name (up to 40 bytes
/// and the Cluster suffix) and the key count (up to 4 digits).
const HEAD: usize = "FCALL_RO".len() + 40 + CLUSTER_SUFFIX.len() + 4;

impl<R: FromRedisValue + Send> Call<R> {
    /// A call of `function` (its Cluster variant when `cluster`) with `keys`, each spelled
    /// by its parts joined, and `args`.
    pub(crate) fn new<'p, 'k, K>(
        function: Function,
        cluster: bool,
        keys: K,
        args: &[Arg<'_>],
    ) -> Self
    where
        K: Iterator<Item = (&'p str, &'k [u8])> + Clone,
    {
        let (mut count, mut bytes) = (0, args.iter().map(Arg::room).sum::<usize>());
        for (prefix, rest) in keys.clone() {
            count += 1;
            bytes += prefix.len() + rest.len();
        }
        let mut cmd = Cmd::with_capacity(3 + count + args.len(), HEAD + bytes);
        cmd.arg(if function.reads_only() {
            "FCALL_RO"
        } else {
            "FCALL"
        });
        let mut name = cmd.writer_for_next_arg();
        write(&mut name, function.name().as_bytes());
        if cluster && function.has_cluster_variant() {
            write(&mut name, CLUSTER_SUFFIX.as_bytes());
        }
        drop(name);
        cmd.arg(count);
        for (prefix, rest) in keys {
            let mut key = cmd.writer_for_next_arg();
            write(&mut key, prefix.as_bytes());
            write(&mut key, rest);
        }
        for arg in args {
            match *arg {
                Arg::Str(s) => cmd.arg(s),
                Arg::Bytes(b) => cmd.arg(b),
                Arg::Int(n) => cmd.arg(n),
            };
        }
        Self {
            cmd,
            function,
            reply: PhantomData,
        }
    }

    /// The function it calls.
    pub(crate) fn function(&self) -> Function {
        self.function
    }

    /// Runs the call on `conn` within `timeout`, naming the lock `name` in its error. On
    /// `Function not found` loads the library where the call went — unless a call of the
    /// same connection loaded it meanwhile — and sends the call once more, both within
    /// `load_timeout` (the command timeout: a load takes longer than a call, and a Redlock
    /// node's first call must not miss its short node timeout for it). A server without
    /// Redis Functions answers [`LockError::ServerTooOld`].
    ///
    /// # Cancel safety
    /// As the function called: a dropped call may or may not have run.
    pub(crate) async fn invoke(
        &self,
        conn: &mut Conn,
        name: &LockName,
        timeout: Duration,
        load_timeout: Duration,
    ) -> Result<R, LockError> {
        // Read before the call goes out: a load that ends after it served this call too.
        let loads_seen = conn.loads().seen();
        match bounded(name, timeout, self.cmd.query_async(conn)).await {
            Err(LockError::Unavailable { source, .. }) if is_missing_function(&source) => {
                self.load_and_retry(conn, name, load_timeout, loads_seen)
                    .await
            }
            Err(LockError::Unavailable { source, .. }) if is_unknown_fcall(&source) => {
                too_old(conn, name, load_timeout).await
            }
            answer => answer,
        }
    }

    /// The rare path of [`invoke`](Self::invoke), type-erased: the hot path's future stays
    /// small, and so do the futures of every caller's caller.
    fn load_and_retry<'a>(
        &'a self,
        conn: &'a mut Conn,
        name: &'a LockName,
        load_timeout: Duration,
        loads_seen: u64,
    ) -> BoxFuture<'a, Result<R, LockError>> {
        let loaded = async move {
            let loads = conn.loads();
            loads.run(loads_seen, load(conn)).await?;
            Ok::<_, Failure>(self.cmd.query_async(conn).await?)
        };
        Box::pin(bounded(name, load_timeout, loaded))
    }

    /// The command as sent, for tests.
    #[cfg(test)]
    pub(crate) fn words(&self) -> Vec<&[u8]> {
        let simple = |arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        };
        self.cmd.args_iter().filter_map(simple).collect()
    }
}

fn write(writer: &mut impl std::io::Write, bytes: &[u8]) {
    writer
        .write_all(bytes)
        .expect("writing to a Vec cannot fail");
}

/// Loads the library where `conn` sends commands: its server (one server, a Redlock node,
/// the master Sentinels name), or every master of a Cluster — a call redirected to the
/// slot's new master (resharding) meets the library missing there, and the client is not
/// told which node answered. `REPLACE`: a server that has the library keeps the same text,
/// since its name carries its version (and a racing client's load is no error).
///
/// # Errors
/// [`Failure::NotLoadable`] for a user without `FUNCTION LOAD`, [`Failure::TooOld`] for a
/// server without Redis Functions, and the Redis errors.
pub(crate) async fn load(conn: &mut Conn) -> Result<(), Failure> {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg("REPLACE").arg(LIBRARY);
    match cmd.query_async::<redis::Value>(conn).await {
        Ok(_) => Ok(()),
        Err(error) if error.code() == Some("NOPERM") => Err(Failure::NotLoadable(error)),
        Err(error) if is_unknown_command(&error, "function") => {
            let version = Box::pin(conn.server_version(b"")).await?;
            Err(Failure::TooOld { version })
        }
        Err(error) => Err(Failure::Redis(error)),
    }
}

/// [`LockError::ServerTooOld`], naming the version of the server `conn` sends to.
fn too_old<'a, R: Send + 'a>(
    conn: &'a mut Conn,
    name: &'a LockName,
    timeout: Duration,
) -> BoxFuture<'a, Result<R, LockError>> {
    Box::pin(async move {
        let version = bounded(name, timeout, conn.server_version(b"")).await?;
        Err(LockError::ServerTooOld {
            name: name.clone(),
            version,
        })
    })
}

/// `ERR Function not found`.
fn is_missing_function(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// A server without Redis Functions: `ERR unknown command 'FCALL'` (Redis before 7.0
/// quotes it with backticks).
fn is_unknown_fcall(error: &RedisError) -> bool {
    is_unknown_command(error, "fcall")
}

/// `ERR unknown command '<command>' …`.
fn is_unknown_command(error: &RedisError, command: &str) -> bool {
    error.code() == Some("ERR")
        && error.detail().is_some_and(|d| {
            let d = d.to_ascii_lowercase();
            d.starts_with("unknown command") && d.contains(command)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str, detail: &str) -> RedisError {
        let text = format!("{code} {detail}");
        let parsed = redis::parse_redis_value(format!("-{text}\r\n").as_bytes());
        match parsed {
            Ok(redis::Value::ServerError(error)) => RedisError::from(error),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn the_errors_that_steer_loading_are_told_apart() {
        let missing = server_error("ERR", "Function not found");
        assert!(is_missing_function(&missing) && !is_unknown_fcall(&missing));
        let old = server_error(
            "ERR",
            "unknown command `FCALL`, with args beginning with: `distlock_4_acquire`, ",
        );
        assert!(is_unknown_fcall(&old) && !is_missing_function(&old));
        let other = server_error("ERR", "unknown command 'FOO', with args beginning with:");
        assert!(!is_unknown_fcall(&other));
    }
}
