//! The client processes as the controller sees them while they run: their history files,
//! read as they grow, give each process's lock client id, its operations waiting for a
//! name, and its holds (the waiter-kill fault picks its victims from these).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::check::handoff::WAITING;
use crate::history::{Event, Record};

/// An operation waiting for its names.
#[derive(Debug, Clone)]
pub struct Wait {
    /// When it was invoked (monotonic ns).
    pub invoked: u64,
    /// The names it wants.
    pub names: Vec<String>,
}

/// What one process's history says so far.
#[derive(Debug, Default)]
pub struct ProcView {
    /// Its lock client's id (the start of its Redis owner ids).
    pub id: Option<String>,
    /// Operations waiting, by op id.
    pub waits: BTreeMap<u64, Wait>,
    /// Holds by op id, with their names.
    pub holds: BTreeMap<u64, Vec<String>>,
    /// Holds whose release was sent.
    pub releasing: BTreeSet<u64>,
}

impl ProcView {
    fn apply(&mut self, record: Record) {
        let op = record.op;
        match record.ev {
            Event::ClientId { id } => self.id = Some(id),
            Event::Invoke { kind, names }
                if WAITING.contains(&kind.as_str()) || kind == "lock_all" =>
            {
                let invoked = record.t;
                self.waits.insert(op, Wait { invoked, names });
            }
            Event::Acquired { tokens, .. } => {
                self.waits.remove(&op);
                self.holds
                    .insert(op, tokens.into_iter().map(|(n, _)| n).collect());
            }
            Event::Releasing => {
                self.releasing.insert(op);
            }
            Event::Complete { .. } => {
                self.waits.remove(&op);
                self.holds.remove(&op);
                self.releasing.remove(&op);
            }
            _ => {}
        }
    }
}

/// One history file read so far, and its last line when not yet complete.
#[derive(Debug)]
struct Followed {
    file: File,
    partial: Vec<u8>,
}

/// The client histories of a run's directory, followed.
#[derive(Debug)]
pub struct Tail {
    dir: PathBuf,
    files: BTreeMap<u32, Followed>,
    /// Each process's view, by process number.
    pub procs: BTreeMap<u32, ProcView>,
}

impl Tail {
    /// Follows the `client-<n>.jsonl` files of `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            files: BTreeMap::new(),
            procs: BTreeMap::new(),
        }
    }

    /// Reads what every client history gained since the last call (and new files).
    pub fn poll(&mut self) {
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let proc = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("client-")?.strip_suffix(".jsonl"))
                    .and_then(|n| n.parse::<u32>().ok());
                if let Some(proc) = proc.filter(|p| !self.files.contains_key(p)) {
                    if let Ok(file) = File::open(entry.path()) {
                        let partial = Vec::new();
                        self.files.insert(proc, Followed { file, partial });
                    }
                }
            }
        }
        for (&proc, followed) in &mut self.files {
            let mut fresh = Vec::new();
            if followed.file.read_to_end(&mut fresh).is_err() || fresh.is_empty() {
                continue;
            }
            followed.partial.extend_from_slice(&fresh);
            let Some(end) = followed.partial.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let rest = followed.partial.split_off(end + 1);
            let view = self.procs.entry(proc).or_default();
            for line in followed.partial.split(|&b| b == b'\n') {
                if let Ok(record) = serde_json::from_slice::<Record>(line) {
                    view.apply(record);
                }
            }
            followed.partial = rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryWriter, Mode, Outcome};

    #[test]
    fn a_followed_history_shows_waits_holds_and_the_client_id() {
        let dir = std::env::temp_dir().join(format!("distlock-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let history = HistoryWriter::create(&dir.join("client-4.jsonl"), 4).unwrap();
        let mut tail = Tail::new(&dir);
        history.log(0, Event::ClientId { id: "u-1".into() });
        let invoke = |op: u64, kind: &str| {
            let (kind, names) = (kind.to_owned(), vec!["x0".to_owned()]);
            history.log(op, Event::Invoke { kind, names });
        };
        invoke(1, "lock");
        invoke(2, "try");
        invoke(3, "lock");
        tail.poll();
        let view = &tail.procs[&4];
        assert_eq!(view.id.as_deref(), Some("u-1"));
        assert_eq!(view.waits.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        let tokens = vec![("x0".to_owned(), 9)];
        let mode = Mode::Exclusive;
        history.log(1, Event::Acquired { mode, tokens });
        history.log(1, Event::Releasing);
        let outcome = Outcome::Fail("WaitTimeout".into());
        history.log(3, Event::Complete { outcome });
        tail.poll();
        let view = &tail.procs[&4];
        assert!(view.waits.is_empty());
        assert_eq!(view.holds[&1], vec!["x0".to_owned()]);
        assert!(view.releasing.contains(&1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
