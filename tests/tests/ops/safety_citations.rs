//! SAFETY.md is the contract: each promise names the test that shows it. Every test it
//! cites must exist, to the test function when it names one: a module path as the suite
//! spells it (`faults::holder_crash`, `core::multi::partial_failure_leaves_nothing_held`,
//! or without its target, `replicas::a_lagging_replica_does_not_stall_other_locks`), a
//! test function by its bare name (`waiters_are_served_in_arrival_order`), or a source file
//! (`tests/src/proxy.rs`, `check/guarded.rs` of the harness). A test renamed or moved
//! without its citation fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the tests are, from the workspace root: the integration tests' targets (a cited
/// path may start with a target, `faults::…`, or inside one, `replicas::…`), the CLI's
/// targets, and the crates' sources (unit tests, cited by name).
const TEST_ROOTS: [&str; 2] = ["tests/tests", "distlock-cli/tests"];
const SOURCE_DIRS: [&str; 9] = [
    "tests/tests",
    "tests/src",
    "tests/verify/src",
    "distlock-cli/tests",
    "lock-core/src",
    "lock-tower/src",
    "lock-testkit/src",
    "lock-macros/src",
    "lock-model/src",
];

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a readable source");
            out.insert(path, text);
        }
    }
}

/// What the citations are checked against.
struct Tests {
    root: PathBuf,
    /// Every source of [`SOURCE_DIRS`], by path.
    files: BTreeMap<PathBuf, String>,
    /// The directories a module path may start in: each root and each target in it.
    starts: Vec<PathBuf>,
}

impl Tests {
    fn of(root: &Path) -> Self {
        let mut files = BTreeMap::new();
        for dir in SOURCE_DIRS {
            sources(&root.join(dir), &mut files);
        }
        let mut starts = Vec::new();
        for test_root in TEST_ROOTS.map(|r| root.join(r)) {
            let targets = std::fs::read_dir(&test_root).expect("a test root");
            let dirs = targets
                .map(|e| e.expect("an entry").path())
                .filter(|p| p.is_dir());
            starts.extend(dirs.collect::<Vec<_>>());
            starts.push(test_root);
        }
        Self {
            root: root.to_owned(),
            files,
            starts,
        }
    }

    fn defines(text: &str, function: &str) -> bool {
        let at = |i: usize| text[i + 3 + function.len()..].starts_with(['(', '<']);
        text.match_indices(&format!("fn {function}"))
            .any(|(i, _)| at(i))
    }

    /// True when `citation` names something that exists.
    fn has(&self, citation: &str) -> bool {
        if citation.ends_with(".rs") {
            // From the root, or from any source directory (`check/guarded.rs`).
            let in_sources = self.files.keys().any(|path| path.ends_with(citation));
            return in_sources || self.root.join(citation).is_file();
        }
        let segments: Vec<&str> = citation.split("::").collect();
        if segments.len() == 1 {
            return self
                .files
                .values()
                .any(|text| Self::defines(text, citation));
        }
        // The longest prefix that is a file under a start; what follows, a function of it.
        self.starts.iter().any(|start| {
            (1..=segments.len()).any(|files| {
                let path = start.join(segments[..files].join("/")).with_extension("rs");
                let Some(text) = self.files.get(&path) else {
                    return false;
                };
                match &segments[files..] {
                    [] => true,
                    [function] => Self::defines(text, function),
                    _ => false,
                }
            })
        })
    }
}

/// The test citations of `markdown`: code spans that are a module path of lower-case
/// words (`faults::holder_crash`), a function name of four words or more (a test's, not
/// an option's like `hold_at_least`), or a `.rs` file.
fn citations(markdown: &str) -> Vec<&str> {
    let spans = markdown.split('`').skip(1).step_by(2);
    let word = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    spans
        .filter(|span| {
            let path = span.contains("::") && span.split("::").all(word);
            let path =
                path && !span.starts_with("lock_core::") && !span.starts_with("lock_tower::");
            let test = word(span) && span.matches('_').count() >= 3;
            let file = span.ends_with(".rs") && !span.contains(' ');
            path || test || file
        })
        .collect()
}

#[test]
fn every_test_safety_md_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let safety = std::fs::read_to_string(root.join("SAFETY.md")).expect("SAFETY.md");
    let tests = Tests::of(&root);
    let cited = citations(&safety);
    assert!(cited.len() > 40, "the citations are read: {cited:?}");
    let missing: Vec<&str> = cited.into_iter().filter(|c| !tests.has(c)).collect();
    assert!(
        missing.is_empty(),
        "SAFETY.md cites tests that do not exist: {missing:?}"
    );
}

/// The control: a module, a function or a file that does not exist is found missing, and
/// each form of citation is read.
#[test]
fn a_citation_of_no_test_is_found_missing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tests = Tests::of(&root);
    for present in [
        "faults::holder_crash",
        "core::multi::partial_failure_leaves_nothing_held",
        "replicas::a_lagging_replica_does_not_stall_other_locks",
        "waiters_are_served_in_arrival_order",
        "tests/src/proxy.rs",
        "check/guarded.rs",
    ] {
        assert!(tests.has(present), "{present}");
    }
    for absent in [
        "faults::no_such_fault",
        "core::multi::no_such_test_of_multi",
        "replicas::no_such_test_of_replicas",
        "no_such_test_anywhere_at_all",
        "tests/src/no_such_file.rs",
    ] {
        assert!(!tests.has(absent), "{absent}");
    }
    let markdown = "(`faults::lost_reply`, `hold_at_least`, `LockError::Lost`, \
                    `lock_core::ops`, `a_test_with_four_words`, `tests/exec.rs`)";
    assert_eq!(
        citations(markdown),
        [
            "faults::lost_reply",
            "a_test_with_four_words",
            "tests/exec.rs"
        ]
    );
}
