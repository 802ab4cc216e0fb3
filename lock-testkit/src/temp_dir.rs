//! [`TempDir`]: a fresh private directory, removed with its contents on drop.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh private directory under the system's temporary directory, removed (with its
/// contents) on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<temp>/<prefix>-<pid>-<n>`.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(prefix: &str) -> io::Result<TempDir> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir();
        // Bounded: a name only collides with leftovers of an earlier run with our pid.
        for _ in 0..1000 {
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{prefix}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("could not create a unique temp dir"))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
