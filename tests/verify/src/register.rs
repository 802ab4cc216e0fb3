//! The fenced resource: one register per lock name on a private redis-server that the
//! nemesis never touches. A register holds the ids of the operations that appended to it
//! (`"17,42,…"`); a hold reads it and writes it back with its own id appended, each access
//! with the hold's fencing token. The script accepts an access only when the token is at
//! least the highest it has accepted for that name (and then remembers it); the control
//! mode `unfenced` accepts every access. Every accepted write is logged as `token:op`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult, Script};

/// The resource is never faulted; this only bounds a stall of the loaded machine.
const TIMEOUT: Duration = Duration::from_secs(10);

/// KEYS: value, highest, log. ARGV: `read`|`write`, token, fenced (1|0), op id, new value.
/// Answers `{1, value}` when accepted, `{0, highest}` when the token is stale.
const SCRIPT: &str = r"
local raw = redis.call('get', KEYS[2]) or '0'
local highest = tonumber(raw)
local token = tonumber(ARGV[2])
if ARGV[3] == '1' and token < highest then
  return {0, raw}
end
if token > highest then redis.call('set', KEYS[2], ARGV[2]) end
if ARGV[1] == 'write' then
  redis.call('set', KEYS[1], ARGV[5])
  redis.call('rpush', KEYS[3], ARGV[2] .. ':' .. ARGV[4])
  return {1, ARGV[5]}
end
return {1, redis.call('get', KEYS[1]) or ''}
";

/// FNV-1a: the digest of a register value, for the linearizability checker.
pub fn digest(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The value with `op` appended.
pub fn appended(value: &str, op: u64) -> String {
    if value.is_empty() {
        op.to_string()
    } else {
        format!("{value},{op}")
    }
}

/// A connection to the resource. Cheap to clone.
#[derive(Clone)]
pub struct Registers {
    conn: MultiplexedConnection,
    script: Script,
    fenced: bool,
}

impl std::fmt::Debug for Registers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registers")
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

fn keys(name: &str) -> [String; 3] {
    ["value", "highest", "log"].map(|k| format!("reg:{{{name}}}:{k}"))
}

impl Registers {
    /// Connects to the resource at `url`; `fenced: false` is the negative control.
    ///
    /// # Errors
    /// When the resource cannot be reached.
    pub async fn connect(url: &str, fenced: bool) -> RedisResult<Self> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(Self {
            conn,
            script: Script::new(SCRIPT),
            fenced,
        })
    }

    async fn call(
        &mut self,
        name: &str,
        op: u64,
        token: u64,
        write: Option<&str>,
    ) -> RedisResult<Result<String, u64>> {
        let mut call = self.script.prepare_invoke();
        for key in keys(name) {
            call.key(key);
        }
        call.arg(if write.is_some() { "write" } else { "read" })
            .arg(token)
            .arg(if self.fenced { "1" } else { "0" })
            .arg(op)
            .arg(write.unwrap_or(""));
        let (accepted, answer): (i64, String) = call.invoke_async(&mut self.conn).await?;
        Ok(if accepted == 1 {
            Ok(answer)
        } else {
            Err(answer.parse().unwrap_or(0))
        })
    }

    /// Reads register `name` with `token`: the value, or the higher token that refused it.
    ///
    /// # Errors
    /// When the resource does not answer.
    pub async fn read(
        &mut self,
        name: &str,
        op: u64,
        token: u64,
    ) -> RedisResult<Result<String, u64>> {
        self.call(name, op, token, None).await
    }

    /// Writes `value` to register `name` with `token`.
    ///
    /// # Errors
    /// When the resource does not answer.
    pub async fn write(
        &mut self,
        name: &str,
        op: u64,
        token: u64,
        value: &str,
    ) -> RedisResult<Result<String, u64>> {
        self.call(name, op, token, Some(value)).await
    }

    /// The final value of register `name` and its log of accepted writes `(token, op)`.
    ///
    /// # Errors
    /// When the resource does not answer.
    pub async fn dump(&mut self, name: &str) -> RedisResult<(String, Vec<(u64, u64)>)> {
        let [value, _, log] = keys(name);
        let (value, log): (Option<String>, Vec<String>) = redis::pipe()
            .get(value)
            .lrange(log, 0, -1)
            .query_async(&mut self.conn)
            .await?;
        Ok((value.unwrap_or_default(), parse_log(&log)))
    }
}

/// A write log's `token:op` entries as `(token, op)` (also the guarded registers').
pub fn parse_log(entries: &[String]) -> Vec<(u64, u64)> {
    entries
        .iter()
        .filter_map(|entry| {
            let (token, op) = entry.split_once(':')?;
            Some((token.parse().ok()?, op.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_values_are_comma_lists_and_digests_differ() {
        assert_eq!(appended("", 7), "7");
        assert_eq!(appended("7", 9), "7,9");
        assert_ne!(digest("7"), digest("7,9"));
        assert_eq!(digest(""), 0xcbf2_9ce4_8422_2325);
    }
}
