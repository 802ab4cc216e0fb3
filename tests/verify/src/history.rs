//! The history: one JSON line per event, written by every client process and by the
//! controller, merged by timestamp (`CLOCK_MONOTONIC` nanoseconds, comparable across the
//! processes of one machine).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use distlock_tests::fault::clock::monotonic_ns;
use serde::{Deserialize, Serialize};

/// The kind of hold an operation takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `client.lock`.
    Exclusive,
    /// `client.write_lock`.
    Write,
    /// `client.read_lock`.
    Read,
    /// `client.semaphore`.
    Permit,
}

/// How an operation, a register access or a release ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Done, and confirmed.
    Ok,
    /// Definitely not done (a refusal, a busy lock, a stale token).
    Fail(String),
    /// Unknown: the answer never came.
    Info(String),
}

/// One event of the history.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// A client operation starts: its kind (`lock`, `lock_all`, `run`, …) and names.
    Invoke {
        /// The operation's kind.
        kind: String,
        /// The names it locks.
        names: Vec<String>,
    },
    /// The operation's hold was granted (`tokens` per name; empty for a re-entry).
    Acquired {
        /// The kind of hold.
        mode: Mode,
        /// `(name, fencing token)`.
        tokens: Vec<(String, u64)>,
    },
    /// `is_held()` was true at a moment no earlier than this event's timestamp.
    Held,
    /// `is_held()` was false: the holder was told.
    NotHeld,
    /// `lost()` fired while the hold was in use.
    Lost,
    /// A register access on the fenced resource (`write: false` is the read).
    Register {
        /// The register (the lock name).
        name: String,
        /// The token sent.
        token: u64,
        /// True for the write.
        write: bool,
        /// When the access was sent.
        sent: u64,
        /// Digest of the value read or written.
        digest: u64,
        /// How it ended.
        outcome: Outcome,
    },
    /// `extend` answered.
    Extend {
        /// How it ended.
        outcome: Outcome,
    },
    /// The hold's release was sent (the claim ends here at the latest).
    Releasing,
    /// The release answered.
    Released {
        /// How it ended.
        outcome: Outcome,
    },
    /// An access to the guarded register beside a lock (`write: false` is the read).
    Guarded {
        /// The register (the lock name).
        name: String,
        /// The hold's token.
        token: u64,
        /// True for the write.
        write: bool,
        /// When the access was sent.
        sent: u64,
        /// How it ended (`Fail("lost")`: refused, the hold was not current).
        outcome: Outcome,
    },
    /// An indeterminate error's text (the outcome keeps only its kind).
    Error {
        /// `LockError`'s Display.
        message: String,
    },
    /// The operation ended.
    Complete {
        /// How it ended.
        outcome: Outcome,
    },
    /// A re-entry got another token than the outer hold (the library promises the same).
    ReentryMismatch {
        /// Outer token.
        outer: u64,
        /// Inner token.
        inner: u64,
    },
    /// A scheduled job's body started (its fire's hold was granted).
    JobRan {
        /// The hold's fencing token.
        token: u64,
    },
    /// A scheduled job's fire was skipped: another instance held its name.
    Skipped {
        /// What the holder's hold had left, in milliseconds, when known.
        remaining_ms: Option<u64>,
    },
    /// `Election::leader()` answered during this op's term (read before the term's
    /// `is_leader()` confirmations).
    LeaderRead {
        /// The token of the term it named; none: nobody leads.
        token: Option<u64>,
    },
    /// An idempotency key's `begin` answered `Run`: the key is in flight for this op.
    InFlight {
        /// The in-flight hold's fencing token.
        token: u64,
    },
    /// An idempotency key's `begin` answered `Replay`: the key had completed.
    Replayed,
    /// An idempotency key's `complete` answered.
    Completed {
        /// When `complete` was sent (the record's retention counts from no earlier).
        sent: u64,
        /// How it ended.
        outcome: Outcome,
    },
    /// An HTTP request with an idempotency key went to client process `server`'s server.
    HttpSent {
        /// The process whose server it went to.
        server: u32,
    },
    /// The answer to an HTTP request with an idempotency key.
    HttpAnswer {
        /// The status.
        status: u16,
        /// Whether the layer marked it a replay of a stored response.
        replayed: bool,
        /// The body (the handler's names the effect and the run; the layer's is its text).
        body: String,
    },
    /// The HTTP handler began under its key's in-flight hold (logged by the serving process,
    /// under the handler's own op id).
    HttpRun {
        /// The op id of the request it serves (the sender's).
        request: u64,
        /// The in-flight hold's fencing token (0: no hold, the `nolock` control).
        token: u64,
    },
    /// A fault started (controller).
    FaultStart {
        /// What it is.
        fault: String,
        /// Whether SAFETY.md withdraws exclusion without fencing during it.
        unsafe_for_exclusion: bool,
        /// Whether two masters may take writes at once during it (a Sentinel failover):
        /// holders granted by the old one cannot be told, so honesty is not checked there.
        #[serde(default)]
        split_brain: bool,
    },
    /// The fault ended (healed).
    FaultEnd {
        /// What it was.
        fault: String,
    },
    /// The nemesis stopped: every fault is healed from here on.
    NemesisEnd,
    /// A client process started (controller).
    ClientStart {
        /// Its OS pid.
        pid: u32,
    },
    /// The controller SIGKILLed a client process.
    ClientKilled,
    /// A client process's lock client is up (logged by the process itself, op 0): the UUID
    /// that starts its Redis owner ids, so the controller can find its holds in Redis.
    ClientId {
        /// `LockClient::id`.
        id: String,
    },
}

/// One history line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// Monotonic nanoseconds.
    pub t: u64,
    /// The process (client number; 0 is the controller).
    pub p: u32,
    /// The operation id (0 for controller events).
    #[serde(default)]
    pub op: u64,
    /// The event.
    #[serde(flatten)]
    pub ev: Event,
}

/// Appends records to a history file, one `write` per line, so a SIGKILL loses at most
/// the line being written. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HistoryWriter {
    p: u32,
    file: Arc<Mutex<File>>,
}

impl HistoryWriter {
    /// Creates (truncates) `path` for process `p`.
    ///
    /// # Errors
    /// When the file cannot be created.
    pub fn create(path: &Path, p: u32) -> std::io::Result<Self> {
        Ok(Self {
            p,
            file: Arc::new(Mutex::new(File::create(path)?)),
        })
    }

    /// Records `ev` of operation `op` now.
    pub fn log(&self, op: u64, ev: Event) {
        self.log_at(monotonic_ns(), op, ev);
    }

    /// Records `ev` of operation `op` at `t`.
    pub fn log_at(&self, t: u64, op: u64, ev: Event) {
        let record = Record {
            t,
            p: self.p,
            op,
            ev,
        };
        let mut line = serde_json::to_string(&record).expect("a record serializes");
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // A full disk ends the run's value, not the run: the checkers report short histories.
        let _ = file.write_all(line.as_bytes());
    }
}

/// Reads every history file in `dir` (`*.jsonl`), skipping a torn last line of a killed
/// process, and returns the records sorted by time.
///
/// # Errors
/// When the directory cannot be read.
pub fn load(dir: &Path) -> std::io::Result<Vec<Record>> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in BufReader::new(File::open(&path)?).lines() {
                if let Ok(record) = serde_json::from_str::<Record>(&line?) {
                    records.push(record);
                }
            }
        }
    }
    records.sort_by_key(|r| (r.t, r.p, r.op));
    Ok(records)
}
