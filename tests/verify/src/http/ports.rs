//! The ports directory: each client process publishes its HTTP server's port as a file
//! named after its process number; gateways list the directory to find the live servers.
//! The controller removes a process's file when it kills it (its replacement publishes a
//! new port), so requests go to live processes — or, in the moment between, to a dead port.

use std::io;
use std::path::{Path, PathBuf};

/// The directory of published ports. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Ports {
    dir: PathBuf,
}

impl Ports {
    /// The ports directory at `dir` (created by [`create`](Self::create)).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Creates the directory at `dir`.
    ///
    /// # Errors
    /// When it cannot be created.
    pub fn create(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let ports = Self::new(dir);
        std::fs::create_dir_all(&ports.dir)?;
        Ok(ports)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Publishes process `proc`'s port (written aside, then renamed: a reader never sees a
    /// half-written file).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn publish(&self, proc: u32, port: u16) -> io::Result<()> {
        let aside = self.dir.join(format!(".{proc}.tmp"));
        std::fs::write(&aside, port.to_string())?;
        std::fs::rename(aside, self.dir.join(proc.to_string()))
    }

    /// Withdraws process `proc`'s port.
    pub fn remove(&self, proc: u32) {
        let _ = std::fs::remove_file(self.dir.join(proc.to_string()));
    }

    /// The published `(process, port)` pairs, by process.
    pub fn live(&self) -> Vec<(u32, u16)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut live: Vec<(u32, u16)> = entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let proc = entry.file_name().to_str()?.parse().ok()?;
                let port = std::fs::read_to_string(entry.path()).ok()?.parse().ok()?;
                Some((proc, port))
            })
            .collect();
        live.sort_unstable();
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_ports_are_listed_until_removed() {
        let dir = std::env::temp_dir().join(format!("verify-ports-{}", std::process::id()));
        let ports = Ports::create(&dir).unwrap();
        ports.publish(2, 4002).unwrap();
        ports.publish(1, 4001).unwrap();
        ports.publish(2, 5002).unwrap();
        assert_eq!(ports.live(), vec![(1, 4001), (2, 5002)]);
        ports.remove(1);
        assert_eq!(ports.live(), vec![(2, 5002)]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
