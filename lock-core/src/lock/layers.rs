//! The layering of `lock/` kept as a test: no module of it imports, directly or through
//! others, a module that imports it back. An import circle is how a call path stops reading
//! top-down (a hold that calls into the registry that holds it, say), so a new one fails
//! here, naming the modules of the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`guard`, `multi::at_once`) → the `lock/` modules its code names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the `lock/` sources under `dir`, tests left out.
fn graph(dir: &Path) -> Graph {
    let mut sources = BTreeMap::new();
    read_modules(dir, "", &mut sources);
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, source) in &sources {
        let parent = module.rsplit_once("::").map(|(parent, _)| parent);
        let mut named = BTreeSet::new();
        for line in code_lines(source) {
            for path in paths_after(line, "crate::lock::") {
                named.insert(resolve(&modules, None, &path));
            }
            for path in paths_after(line, "super::") {
                named.insert(resolve(&modules, parent, &path));
            }
        }
        named.retain(|m| m != module && modules.contains(m));
        graph.insert(module.clone(), named);
    }
    graph
}

/// Every `.rs` file under `dir` as a module path, with its text.
fn read_modules(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("lock/ is readable") {
        let path = entry.expect("a directory entry").path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let module = match (prefix, stem) {
            (_, "mod") => prefix.to_owned(),
            ("", _) => stem.to_owned(),
            _ => format!("{prefix}::{stem}"),
        };
        if path.is_dir() {
            read_modules(&path, &module, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !module.is_empty() {
            let text = std::fs::read_to_string(&path).expect("a readable source");
            out.insert(module, text);
        }
    }
}

/// The lines of code before the tests, comments and doc links left out.
fn code_lines(source: &str) -> impl Iterator<Item = &str> {
    let code = source.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .filter(|line| !line.trim().is_empty())
}

/// The module paths (`a` or `a::b`) that follow each `marker` on `line`.
fn paths_after(line: &str, marker: &str) -> Vec<Vec<String>> {
    line.match_indices(marker)
        .map(|(at, _)| {
            let rest = &line[at + marker.len()..];
            let path = rest
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default();
            path.split("::").map(str::to_owned).collect()
        })
        .collect()
}

/// The longest known module a path names, looked up in `base` (a `super::` path of one of
/// its modules) or at the top of `lock/`.
fn resolve(modules: &BTreeSet<String>, base: Option<&str>, path: &[String]) -> String {
    (1..=path.len())
        .rev()
        .map(|n| {
            let tail = path[..n].join("::");
            match base {
                Some(base) => format!("{base}::{tail}"),
                None => tail,
            }
        })
        .find(|candidate| modules.contains(candidate))
        .unwrap_or_default()
}

/// The circles of `graph`: its strongly connected components of more than one module.
fn circles(graph: &Graph) -> Vec<BTreeSet<String>> {
    let reaches = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(module) = todo.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reaches(m))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (module, reached) in &reach {
        let circle: BTreeSet<String> = (reached.iter())
            .filter(|other| reach[other].contains(*module))
            .cloned()
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

#[test]
fn no_module_of_lock_imports_one_that_imports_it_back() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lock");
    let graph = graph(&dir);
    assert!(graph.len() > 15, "lock/ read: {graph:?}");
    // The scan sees real imports (else an empty graph would pass).
    assert!(graph["acquire"].contains("engine"), "{graph:?}");
    assert!(graph["multi::at_once"].contains("identity"), "{graph:?}");
    assert_eq!(circles(&graph), Vec::<BTreeSet<String>>::new(), "{graph:?}");
}

#[test]
fn a_circle_is_found_and_named() {
    let edges = [
        ("engine", "holds"),
        ("holds", "held"),
        ("held", "engine"),
        ("guard", "held"),
    ];
    let mut graph = Graph::new();
    for (from, to) in edges {
        graph
            .entry(from.to_owned())
            .or_default()
            .insert(to.to_owned());
        graph.entry(to.to_owned()).or_default();
    }
    let names = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(circles(&graph), vec![names(&["engine", "held", "holds"])]);
}

#[test]
fn super_paths_resolve_beside_the_module() {
    let modules: BTreeSet<String> = ["multi", "multi::guard", "multi::at_once", "guard"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    // In `multi/request.rs`, `super::` is `multi`.
    let found = resolve(&modules, Some("multi"), &path("guard::MultiLockGuard"));
    assert_eq!(found, "multi::guard");
    assert_eq!(resolve(&modules, None, &path("guard::LockGuard")), "guard");
}
