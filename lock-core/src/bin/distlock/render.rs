//! Output: aligned text for people, JSON for scripts.

use std::io::IsTerminal;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::{HolderInfo, LockState};
use serde_json::{json, Value};

/// Prints `value` as JSON, or the text `text` makes.
pub(crate) fn print(json: bool, value: &Value, text: impl FnOnce() -> String) {
    if json {
        println!("{value}");
    } else {
        print!("{}", text());
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn holder_json(holder: &HolderInfo) -> Value {
    json!({
        "owner": holder.owner(),
        "service": holder.service(),
        "host": holder.host(),
        "pid": holder.pid(),
        "request_id": holder.request_id(),
        "acquired_at_ms": holder.acquired_at_ms(),
        "held_for_ms": held_for(holder).map(millis),
    })
}

pub(crate) fn state_json(state: &LockState) -> Value {
    json!({
        "name": lossy(state.name().as_bytes()),
        "key": lossy(state.key()),
        "held": state.is_held(),
        "owner": state.owner(),
        "hold_count": state.hold_count(),
        "ttl_ms": state.remaining_ttl().map(millis),
        "fencing_token": state.fencing_token(),
        "waiters": state.waiters(),
        "holder": state.holder().map(holder_json),
    })
}

pub(crate) fn list_json(locks: &[LockState]) -> Value {
    Value::Array(locks.iter().map(state_json).collect())
}

pub(crate) fn released_json(before: &LockState, released: bool) -> Value {
    json!({
        "name": lossy(before.name().as_bytes()),
        "released": released,
        "was": released.then(|| state_json(before)),
    })
}

/// How long the holder has held the lock, by this machine's clock.
fn held_for(holder: &HolderInfo) -> Option<Duration> {
    SystemTime::now().duration_since(holder.acquired_at()).ok()
}

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn who(state: &LockState) -> String {
    match (state.holder(), state.owner()) {
        (Some(holder), _) => {
            let since = held_for(holder).map(seconds).unwrap_or_default();
            format!("{holder} (held {since})")
        }
        (None, Some(owner)) => format!("owner {owner} (no holder record: a Redisson client?)"),
        (None, None) => "nobody".to_owned(),
    }
}

pub(crate) fn state_text(state: &LockState) -> String {
    let mut out = format!("lock      {}  (key {})\n", state.name(), lossy(state.key()));
    if !state.is_held() {
        out.push_str("state     free\n");
    } else {
        out.push_str(&format!("held by   {}\n", who(state)));
        out.push_str(&format!(
            "owner     {} (hold count {})\n",
            state.owner().unwrap_or("?"),
            state.hold_count()
        ));
        let lease = state
            .remaining_ttl()
            .map_or("no expiry".to_owned(), |t| format!("{} left", seconds(t)));
        out.push_str(&format!("lease     {lease}\n"));
    }
    out.push_str(&format!("fencing   {}\n", state.fencing_token()));
    out.push_str(&format!("waiters   {}\n", state.waiters()));
    out
}

pub(crate) fn released_text(before: &LockState, released: bool) -> String {
    if released {
        format!(
            "released `{}`, which was held by {}\n",
            before.name(),
            who(before)
        )
    } else {
        format!("`{}` was not held: nothing released\n", before.name())
    }
}

/// One row per lock, columns aligned.
pub(crate) fn table(locks: &[LockState]) -> String {
    let mut rows =
        vec![["NAME", "HOLDER", "HELD FOR", "TTL", "TOKEN", "WAITERS"].map(String::from)];
    for state in locks {
        let holder = state.holder();
        rows.push([
            state.name().to_string(),
            match (holder, state.owner()) {
                (Some(h), _) => match h.pid() {
                    Some(pid) => format!("{}@{} (pid {pid})", h.service(), h.host()),
                    None => format!("{}@{}", h.service(), h.host()),
                },
                (None, Some(owner)) => owner.to_owned(),
                (None, None) => "-".to_owned(),
            },
            holder.and_then(held_for).map_or("-".to_owned(), seconds),
            state.remaining_ttl().map_or("-".to_owned(), seconds),
            state.fencing_token().to_string(),
            state.waiters().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if locks.is_empty() {
        out.push_str("(no locks)\n");
    }
    out
}

/// `HH:MM:SS` (UTC) of a time in ms since the epoch.
fn since(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}Z",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// One refresh of `watch`: a JSON line, or the table (redrawn in place on a terminal).
pub(crate) fn watch_frame(json: bool, held: &[LockState]) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis);
    if json {
        println!("{}", json!({ "at_ms": now, "locks": list_json(held) }));
        return;
    }
    if std::io::stdout().is_terminal() {
        print!("\x1b[2J\x1b[H");
    }
    let waiting: usize = held.iter().map(LockState::waiters).sum();
    println!(
        "distlock watch at {}: {} held, {waiting} waiting",
        since(now),
        held.len()
    );
    print!("{}", table(held));
}
