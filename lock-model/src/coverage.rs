//! Line coverage of the library's Lua: which code lines the calls ran, and which they
//! never reached.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::library::Library;

/// The lines each library ran, merged across runtimes (one per worker thread).
#[derive(Clone, Debug, Default)]
pub struct Coverage {
    libraries: BTreeMap<u64, (Arc<Library>, BTreeSet<u32>)>,
}

/// A code line no call reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissedLine {
    /// The line (1-based, of the library's text).
    pub line: u32,
    /// The `local function` it is in.
    pub function: String,
    /// Its text.
    pub text: String,
}

/// The coverage of one library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoverageReport {
    /// How many code lines it has (lines of its functions that a call could run).
    pub code_lines: usize,
    /// How many of them ran.
    pub covered: usize,
    /// The others, in line order.
    pub missed: Vec<MissedLine>,
}

impl Coverage {
    /// Records that `line` of `library` ran.
    pub(crate) fn record(&mut self, library: &Arc<Library>, lines: &BTreeSet<u32>) {
        self.libraries
            .entry(library.digest)
            .or_insert_with(|| (Arc::clone(library), BTreeSet::new()))
            .1
            .extend(lines);
    }

    /// Adds what `other` covered.
    pub fn merge(&mut self, other: &Coverage) {
        for (library, lines) in other.libraries.values() {
            self.record(library, lines);
        }
    }

    /// The lines of `library` that ran.
    pub fn covered(&self, library: &Library) -> BTreeSet<u32> {
        self.libraries
            .get(&library.digest)
            .map(|(_, lines)| lines.clone())
            .unwrap_or_default()
    }

    /// What ran of `library`'s code lines, and what never did.
    pub fn report(&self, library: &Library) -> CoverageReport {
        let covered = self.covered(library);
        let missed: Vec<_> = library
            .code_lines()
            .iter()
            .filter(|(line, _)| !covered.contains(line))
            .map(|(&line, function)| MissedLine {
                line,
                function: function.clone(),
                text: library.line(line).trim().to_owned(),
            })
            .collect();
        CoverageReport {
            code_lines: library.code_lines().len(),
            covered: library.code_lines().len() - missed.len(),
            missed,
        }
    }
}
