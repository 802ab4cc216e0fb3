//! The guarded registers: one beside each exclusive and read-write lock, in the lock's own
//! Redis (its slot on a Cluster), written only through guarded writes (`LockGuard::write`,
//! or `LockInfo::write` of the current lock inside `run`). A hold reads the register, waits
//! its think time, and writes it back with its op id appended — one call that also logs
//! `token:op` — committed only while the hold is current. The negative controls write the
//! same with plain commands instead ([`Writes::Plain`]). At the end the controller reads
//! and deletes them through a hold ([`dump_all`]); [`crate::check::guarded`] judges them.

use std::collections::BTreeMap;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::lock_url;
use lock_core::{LockClient, LockError, LockGuard, LockInfo};
use redis::{FromRedisValue, Pipeline, Value};

use crate::args::{Control, Topology};
use crate::check::registers::Dump;
use crate::history::{Event, HistoryWriter, Outcome};
use crate::hold::error_outcome;
use crate::register::appended;
use crate::workload::register_names;

/// How a run writes the guarded registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Not at all: under Redlock there is no single Redis to write to; the controls on
    /// Sentinel have no plain address of the master.
    Off,
    /// Through the hold, guarded.
    Guarded,
    /// The negative controls: plain commands to this address (a `fault::lock_url` word).
    Plain(String),
}

impl Writes {
    /// The writes of a run on `topology` whose clients got `urls`, under `control`.
    pub fn of(topology: Topology, urls: &[String], control: Option<Control>) -> Self {
        match (topology, control.filter(|c| c.in_clients())) {
            (Topology::Redlock, _) => Self::Off,
            (_, None) => Self::Guarded,
            (Topology::Single, Some(_)) => Self::Plain(urls[0].clone()),
            (Topology::Cluster, Some(_)) => Self::Plain(lock_url::cluster(urls)),
            (Topology::Sentinel, Some(_)) => Self::Off,
        }
    }
}

/// Who writes a register.
enum Writer<'a> {
    Guard(&'a LockGuard),
    Current(LockInfo),
    Plain(&'a str),
}

impl Writer<'_> {
    async fn send(&self, commands: &Pipeline) -> Result<Value, Outcome> {
        let written = match self {
            Self::Guard(guard) => guard.write(commands).await,
            Self::Current(info) => info.write(commands).await,
            Self::Plain(word) => {
                return (lock_url::plain_query(word, commands).await)
                    .map_err(|e| Outcome::Info(e.to_string()))
            }
        };
        written.map_err(|e: LockError| {
            if e.is_lost() {
                Outcome::Fail("lost".to_owned())
            } else {
                error_outcome(&e)
            }
        })
    }
}

/// The register's key and its log's, beside the lock `name` (the default key prefix, as
/// the workload's clients have it; `LockGuard::key` names the same).
fn keys(name: &str) -> [String; 2] {
    ["gw", "gwlog"].map(|suffix| format!("{{distlock:{name}}}:{suffix}"))
}

/// Read-modify-writes the guarded register of `name` under the hold that `guards` hold.
pub async fn under_guards(
    writes: &Writes,
    guards: &[LockGuard],
    history: &HistoryWriter,
    op: u64,
    name: &str,
    token: u64,
    think: Duration,
) {
    let writer = match writes {
        Writes::Off => return,
        Writes::Plain(word) => Writer::Plain(word),
        Writes::Guarded => {
            let named = guards
                .iter()
                .find(|g| g.name().as_bytes() == name.as_bytes());
            match named {
                Some(guard) => Writer::Guard(guard),
                None => return,
            }
        }
    };
    read_modify_write(&writer, history, op, name, token, think).await;
}

/// Read-modify-writes the guarded register of `name` under the current lock (inside `run`).
pub async fn under_current(
    writes: &Writes,
    history: &HistoryWriter,
    op: u64,
    name: &str,
    token: u64,
    think: Duration,
) {
    let writer = match (writes, lock_core::current_lock()) {
        (Writes::Plain(word), _) => Writer::Plain(word),
        (Writes::Guarded, Some(info)) => Writer::Current(info),
        _ => return,
    };
    read_modify_write(&writer, history, op, name, token, think).await;
}

async fn read_modify_write(
    writer: &Writer<'_>,
    history: &HistoryWriter,
    op: u64,
    name: &str,
    token: u64,
    think: Duration,
) {
    if !register_names().contains(&name) {
        return;
    }
    let [value, log] = keys(name);
    let mut read = redis::pipe();
    read.cmd("GET").arg(&value);
    let sent = monotonic_ns();
    let now = writer.send(&read).await.and_then(|reply| {
        let (now,) = <(Option<String>,)>::from_redis_value(reply)
            .map_err(|e| Outcome::Info(e.to_string()))?;
        Ok(now.unwrap_or_default())
    });
    let outcome = now.as_ref().err().cloned().unwrap_or(Outcome::Ok);
    history.log(op, event(name, token, false, sent, outcome));
    let Ok(now) = now else { return };
    tokio::time::sleep(think).await;
    let mut write = redis::pipe();
    write.cmd("SET").arg(&value).arg(appended(&now, op));
    write.cmd("RPUSH").arg(&log).arg(format!("{token}:{op}"));
    let sent = monotonic_ns();
    let outcome = writer.send(&write).await.err().unwrap_or(Outcome::Ok);
    history.log(op, event(name, token, true, sent, outcome));
}

fn event(name: &str, token: u64, write: bool, sent: u64, outcome: Outcome) -> Event {
    Event::Guarded {
        name: name.to_owned(),
        token,
        write,
        sent,
        outcome,
    }
}

/// Reads and deletes every guarded register through a hold of its lock (so no key is left
/// for the liveness checker); none when the run wrote none.
///
/// # Errors
/// When a lock or the read fails.
pub async fn dump_all(
    writes: &Writes,
    client: &LockClient,
) -> Result<BTreeMap<String, Dump>, String> {
    let mut dumps = BTreeMap::new();
    if *writes == Writes::Off {
        return Ok(dumps);
    }
    for name in register_names() {
        let guard = (client.lock(name).wait(Duration::from_secs(20)).await)
            .map_err(|e| format!("guarded register {name}: {e}"))?;
        let [value, log] = keys(name);
        let mut read = redis::pipe();
        read.cmd("GET").arg(&value);
        read.cmd("LRANGE").arg(&log).arg(0).arg(-1);
        read.cmd("DEL").arg(&value).arg(&log);
        let (value, log, _): (Option<String>, Vec<String>, i64) =
            (guard.write(&read).await).map_err(|e| format!("guarded register {name}: {e}"))?;
        let _ = guard.release().await;
        let log = crate::register::parse_log(&log);
        let value = value.unwrap_or_default();
        dumps.insert(name.to_owned(), Dump { value, log });
    }
    Ok(dumps)
}
