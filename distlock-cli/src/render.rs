//! Output: aligned text for people, JSON for scripts.
//!
//! Durations go into JSON as `Duration::as_millis` (a `u128` that serde_json writes as a
//! number while it fits in a `u64`: Redis' TTLs are `i64` ms and wall-clock spans are far
//! below that).

use std::io::IsTerminal;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::ops::{Holding, LockState};
use lock_core::{HolderInfo, LockMode};
use serde_json::{json, Value};

/// Prints `value` as one line of JSON, or the text `text` makes.
pub(crate) fn print(json: bool, value: &Value, text: impl FnOnce() -> String) {
    if json {
        println!("{value}");
    } else {
        print!("{}", text());
    }
}

/// Bytes (a name or key) as text, invalid UTF-8 replaced.
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The holder record as JSON, with how long it has been held by this machine's clock.
fn holder_json(holder: &HolderInfo) -> Value {
    json!({
        "owner": holder.owner(),
        "service": holder.service(),
        "host": holder.host(),
        "pid": holder.pid(),
        "request_id": holder.request_id(),
        "acquired_at_ms": holder.acquired_at_ms(),
        "held_for_ms": held_for(holder).map(|d| d.as_millis()),
    })
}

/// One lock as JSON (`inspect --json`, and each element of `list --json`).
pub(crate) fn state_json(state: &LockState) -> Value {
    json!({
        "name": lossy(state.name().as_bytes()),
        "key": lossy(state.key()),
        "held": state.is_held(),
        "owner": state.owner(),
        "hold_count": state.hold_count(),
        "ttl_ms": state.remaining_ttl().map(|d| d.as_millis()),
        "fencing_token": state.fencing_token(),
        "waiters": state.waiters(),
        "holder": state.holder().map(holder_json),
        "mode": state.mode().map(LockMode::as_str),
        "holders": state.holders().iter().map(holding_json).collect::<Vec<_>>(),
    })
}

/// One holder of a lock, a read-write lock or a semaphore, as JSON.
fn holding_json(holding: &Holding) -> Value {
    json!({
        "owner": holding.owner(),
        "fencing_token": holding.fencing_token(),
        "ttl_ms": holding.remaining_ttl().map(|d| d.as_millis()),
        "holder": holding.holder().map(holder_json),
    })
}

/// What holds a read-write lock or a semaphore, in words: `3 readers`, `a writer`,
/// `2 permits`; `None` for a lock.
fn holders_word(state: &LockState) -> Option<String> {
    let n = state.holders().len();
    let counted = |noun: &str| format!("{n} {noun}{}", if n == 1 { "" } else { "s" });
    match state.mode()? {
        LockMode::Read => Some(counted("reader")),
        LockMode::Write => Some("a writer".to_owned()),
        LockMode::Permit => Some(counted("permit")),
        // An exclusive lock's holder is named instead; a mode of a newer lock-core too.
        _ => None,
    }
}

/// Several locks as a JSON array.
pub(crate) fn list_json(locks: &[LockState]) -> Value {
    Value::Array(locks.iter().map(state_json).collect())
}

/// The outcome of `release --force` as JSON: whether a hold was deleted, which, and how
/// many former holders' clients heard it (`told`).
pub(crate) fn released_json(before: &LockState, told: Option<usize>) -> Value {
    json!({
        "name": lossy(before.name().as_bytes()),
        "released": told.is_some(),
        "was": told.map(|_| state_json(before)),
        "told": told,
    })
}

/// How long the holder has held the lock, by this machine's clock (`None` when the Redis
/// clock is ahead of it).
fn held_for(holder: &HolderInfo) -> Option<Duration> {
    SystemTime::now().duration_since(holder.acquired_at()).ok()
}

/// A duration in seconds with one decimal, `2.5s`.
fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Who holds the lock, in full: the holder record (`HolderInfo`'s `Display`: service, host,
/// pid, request id, since when) and for how long, or the bare owner id when the holder
/// recorded nothing (a Redisson client).
fn who(state: &LockState) -> String {
    match (state.holder(), state.owner()) {
        (Some(holder), _) => {
            let held = held_for(holder).map(seconds).unwrap_or_default();
            format!("{holder} (held {held})")
        }
        (None, Some(owner)) => format!("owner {owner} (no holder record: a Redisson client?)"),
        (None, None) => "nobody".to_owned(),
    }
}

/// `inspect`: one field per line.
pub(crate) fn state_text(state: &LockState) -> String {
    let mut out = format!("lock      {}  (key {})\n", state.name(), lossy(state.key()));
    if !state.is_held() {
        out.push_str("state     free\n");
    } else {
        match holders_word(state) {
            Some(word) => {
                out.push_str(&format!("held by   {word}\n"));
                for holding in state.holders() {
                    let who = match holding.holder() {
                        Some(holder) => holder.to_string(),
                        None => format!("owner {}", holding.owner()),
                    };
                    let lease = holding
                        .remaining_ttl()
                        .map_or("no expiry".to_owned(), |t| format!("{} left", seconds(t)));
                    let token = holding.fencing_token();
                    out.push_str(&format!("  holder  {who}, token {token}, {lease}\n"));
                }
            }
            None => {
                out.push_str(&format!("held by   {}\n", who(state)));
                out.push_str(&format!(
                    "owner     {} (hold count {})\n",
                    state.owner().unwrap_or("?"),
                    state.hold_count()
                ));
            }
        }
        let lease = state
            .remaining_ttl()
            .map_or("no expiry".to_owned(), |t| format!("{} left", seconds(t)));
        out.push_str(&format!("lease     {lease}\n"));
    }
    out.push_str(&format!("fencing   {}\n", state.fencing_token()));
    out.push_str(&format!("waiters   {}\n", state.waiters()));
    out
}

/// `release --force`: what was released and what happens to the former holder, or that
/// nothing was released.
pub(crate) fn released_text(before: &LockState, told: Option<usize>) -> String {
    let Some(told) = told else {
        return format!("`{}` was not held: nothing released\n", before.name());
    };
    let released = format!(
        "released `{}`, which was held by {}\n",
        before.name(),
        who(before)
    );
    let holder = if told > 0 {
        "the former holder's client was told: its guard reports the lock lost now (a \
         lock-tower request is aborted with 503)"
    } else {
        "warning: the former holder's client did not hear it (not a distlock client, or its \
         connection is down): it may work on until its next renewal (a third of its lease) \
         or the end of its lease, beside the next holder"
    };
    format!("{released}{holder}\n")
}

/// The HOLDER cell of the table: `service@host (pid N)`. Shorter than `HolderInfo`'s
/// `Display`, which adds the request id and the acquisition time (the table has a HELD FOR
/// column instead).
fn holder_cell(state: &LockState) -> String {
    if let Some(word) = holders_word(state).filter(|_| state.holders().len() != 1) {
        return word;
    }
    match (state.holder(), state.owner()) {
        (Some(h), _) => match h.pid() {
            Some(pid) => format!("{}@{} (pid {pid})", h.service(), h.host()),
            None => format!("{}@{}", h.service(), h.host()),
        },
        (None, Some(owner)) => owner.to_owned(),
        (None, None) => "-".to_owned(),
    }
}

/// `list` and `watch`: one row per lock, columns aligned, `(no locks)` when empty.
pub(crate) fn table(locks: &[LockState]) -> String {
    let mut rows =
        vec![["NAME", "HOLDER", "HELD FOR", "TTL", "TOKEN", "WAITERS"].map(String::from)];
    for state in locks {
        rows.push([
            state.name().to_string(),
            holder_cell(state),
            state
                .holder()
                .and_then(held_for)
                .map_or("-".to_owned(), seconds),
            state.remaining_ttl().map_or("-".to_owned(), seconds),
            state.fencing_token().to_string(),
            state.waiters().to_string(),
        ]);
    }
    let mut out = columns(&rows);
    if locks.is_empty() {
        out.push_str("(no locks)\n");
    }
    out
}

/// `rows` (the first the header) as text, each column as wide as its widest cell.
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The UTC time of day of `at`, `HH:MM:SSZ`, for the `watch` header (lock-core formats
/// full RFC 3339 times only inside `HolderInfo`'s `Display`).
fn utc_time_of_day(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02}Z",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// One refresh of `watch` over `locks` (held, or free with waiters): a JSON line, or a
/// header and the table (redrawn in place on a terminal).
pub(crate) fn watch_frame(json: bool, locks: &[LockState]) {
    let now = SystemTime::now();
    if json {
        let at_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        println!("{}", json!({ "at_ms": at_ms, "locks": list_json(locks) }));
        return;
    }
    if std::io::stdout().is_terminal() {
        print!("\x1b[2J\x1b[H");
    }
    let held = locks.iter().filter(|l| l.is_held()).count();
    let waiting: usize = locks.iter().map(LockState::waiters).sum();
    println!(
        "distlock watch at {}: {held} held, {waiting} waiting",
        utc_time_of_day(now)
    );
    print!("{}", table(locks));
}
