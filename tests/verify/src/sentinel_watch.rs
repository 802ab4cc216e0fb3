//! What the Sentinels name as master, and what each data server says it is, written to
//! `sentinel-view.jsonl` in the run's directory whenever either changes. A stretch in which
//! every client's every call fails (no master to be had) is then explained by the servers'
//! own view, not guessed at.

use std::path::Path;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use std::io::Write;

/// How often the view is read.
const EVERY: Duration = Duration::from_millis(250);
/// Bound on each connection and answer.
const TIMEOUT: Duration = Duration::from_millis(400);

/// Records the Sentinels' answers (`host:port` or an error) and each data server's `ROLE`
/// (its first element, or an error: a frozen server does not answer) until aborted, or for
/// at most `limit`.
pub async fn watch(sentinels: Vec<String>, servers: Vec<String>, dir: &Path, limit: Duration) {
    let Ok(mut file) = std::fs::File::create(dir.join("sentinel-view.jsonl")) else {
        return;
    };
    let mut last = None;
    let mut ticks = tokio::time::interval(EVERY);
    let until = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < until {
        ticks.tick().await;
        let named = ask_all(&sentinels, sentinel_master).await;
        let roles = ask_all(&servers, role).await;
        let view = (named, roles);
        if last.as_ref() != Some(&view) {
            let line = serde_json::json!({ "t": monotonic_ns(), "named": view.0, "roles": view.1 });
            let _ = writeln!(file, "{line}");
            last = Some(view);
        }
    }
}

async fn ask_all<F, Fut>(urls: &[String], ask: F) -> Vec<String>
where
    F: Fn(redis::aio::MultiplexedConnection) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<String>>,
{
    let mut out = Vec::with_capacity(urls.len());
    for url in urls {
        let answer = async {
            let client = redis::Client::open(url.as_str())?;
            ask(client.get_multiplexed_async_connection().await?).await
        };
        out.push(match tokio::time::timeout(TIMEOUT, answer).await {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => format!("error: {e}"),
            Err(_) => "no answer".to_owned(),
        });
    }
    out
}

async fn sentinel_master(
    mut conn: redis::aio::MultiplexedConnection,
) -> redis::RedisResult<String> {
    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(distlock_tests::sentinel::SERVICE)
        .query_async(&mut conn)
        .await?;
    Ok(addr.map_or_else(|| "none".to_owned(), |(h, p)| format!("{h}:{p}")))
}

async fn role(mut conn: redis::aio::MultiplexedConnection) -> redis::RedisResult<String> {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
    Ok(match role.first() {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    })
}
