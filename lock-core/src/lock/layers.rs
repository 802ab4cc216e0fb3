//! The layering of `lock/` kept as a test: no module of it imports, directly or through
//! others, a module that imports it back. An import circle is how a call path stops reading
//! top-down (a hold that calls into the registry that holds it, say), so a new one fails
//! here, naming the modules of the circle.
//!
//! Each source is parsed whole (with `syn`), and every path it names counts: each leaf of
//! a `use` tree, grouped and nested (`use crate::lock::{a, b::{X, Y}}`), every path in the
//! code, and the `crate::`, `super::` and `self::` paths in macro bodies (a
//! `macro_rules!` expands where it is used, but its author wrote the import here).
//!
//! Test code is left out: items marked `#[cfg(test)]` or `#[test]` (a `mod tests { … }`
//! block, a test-only constructor in an `impl`), found by the parser wherever they are in
//! the file, so the code after them is still read. A test builds its fixtures from whatever
//! it needs (the registry's tests make holds as an acquisition would); that is no call path
//! of the library, and an import back from it is no circle in the code that runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Attribute, ImplItem, Item};

/// Module path (`guard`, `multi::at_once`) → the `lock/` modules its code names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// A path as written, one name per segment (`super`, `guard`, `LockGuard`).
type Segments = Vec<String>;

/// The import graph of the `lock/` sources under `dir`, tests left out.
fn graph(dir: &Path) -> Graph {
    let mut sources = BTreeMap::new();
    read_modules(dir, "", &mut sources);
    graph_of(&sources)
}

/// The import graph of `sources` (module path → its text).
fn graph_of(sources: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, source) in sources {
        let file = syn::parse_file(source).unwrap_or_else(|e| panic!("{module}: {e}"));
        let mut paths = Paths {
            here: module.split("::").map(str::to_owned).collect(),
            found: Vec::new(),
        };
        paths.visit_file(&file);
        let mut named: BTreeSet<String> = (paths.found.iter())
            .filter_map(|(here, path)| resolve(&modules, here, path))
            .collect();
        named.remove(module);
        graph.insert(module.clone(), named);
    }
    graph
}

/// Every `.rs` file under `dir` as a module path, with its text (`mod.rs` of `lock/`
/// itself, which only declares the modules, left out).
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

/// Collects the paths one file names, each with the module it is written in.
struct Paths {
    /// Where the code being read is, below `lock/`: the file's module, then any inline
    /// module it is in.
    here: Segments,
    /// Each path, with the `here` it was written at.
    found: Vec<(Segments, Segments)>,
}

impl Paths {
    fn add(&mut self, path: Segments) {
        self.found.push((self.here.clone(), path));
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        if !is_test(impl_item_attrs(item)) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        // `mod x;` declares a child: no import. An inline module's paths are read in it.
        if module.content.is_some() {
            self.here.push(module.ident.to_string());
            visit::visit_item_mod(self, module);
            self.here.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&item.tree, &mut Vec::new(), &mut leaves);
        leaves.into_iter().for_each(|leaf| self.add(leaf));
    }

    // `pub(super)` names who may see an item, not a module it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.add(path.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let mut paths = Vec::new();
        macro_paths(mac.tokens.clone(), &mut paths);
        paths.into_iter().for_each(|path| self.add(path));
        visit::visit_macro(self, mac);
    }
}

/// The leaves of a `use` tree, each as its whole path (`a::{b, c::{D, E}}`: `a::b`,
/// `a::c::D`, `a::c::E`; `a::{self}` and `a::*`: `a`).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Segments, out: &mut Vec<Segments>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            use_leaves(&path.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => out.push(leaf(prefix, &name.ident)),
        syn::UseTree::Rename(rename) => out.push(leaf(prefix, &rename.ident)),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(group) => {
            for item in &group.items {
                use_leaves(item, prefix, out);
            }
        }
    }
}

/// `prefix::ident`, or `prefix` for `self`.
fn leaf(prefix: &[String], ident: &syn::Ident) -> Segments {
    let mut path = prefix.to_vec();
    if ident != "self" {
        path.push(ident.to_string());
    }
    path
}

/// The paths starting with `crate`, `super` or `self` in a macro's tokens (a macro body
/// is no code to parse: its tokens are read as they stand, `::` as two joint colons).
fn macro_paths(tokens: TokenStream, out: &mut Vec<Segments>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut at = 0;
    while at < tokens.len() {
        let mut path = Segments::new();
        while let Some(TokenTree::Ident(ident)) = tokens.get(at) {
            path.push(ident.to_string());
            at += 1;
            if !is_path_separator(&tokens[at..]) {
                break;
            }
            at += 2;
        }
        if path.is_empty() {
            if let TokenTree::Group(group) = &tokens[at] {
                macro_paths(group.stream(), out);
            }
            at += 1;
        } else if ["crate", "super", "self"].contains(&path[0].as_str()) {
            out.push(path);
        }
    }
}

/// True when `tokens` start with `::`.
fn is_path_separator(tokens: &[TokenTree]) -> bool {
    matches!(tokens, [TokenTree::Punct(a), TokenTree::Punct(b), ..]
        if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
}

/// The `lock/` module that `path`, written in the module `here`, names: the longest known
/// module its path from the top of `lock/` starts with. `None` for a path that does not
/// lead into `lock/` (std, another crate, the rest of this crate, a local item).
fn resolve(modules: &BTreeSet<String>, here: &[String], path: &[String]) -> Option<String> {
    let from_top = from_lock_top(modules, here, path)?;
    (1..=from_top.len())
        .rev()
        .map(|n| from_top[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
}

/// `path`, written in `here`, from the top of `lock/`: `crate::lock::…` from there,
/// `super::…` and `self::…` from `here`, and a path that starts with a child module of
/// `here` (`use guard::X` in `multi/mod.rs`) from `here`.
fn from_lock_top(modules: &BTreeSet<String>, here: &[String], path: &[String]) -> Option<Segments> {
    match path {
        [krate, lock, rest @ ..] if krate == "crate" && lock == "lock" => Some(rest.to_vec()),
        [first, ..] if first == "super" || first == "self" => {
            let mut base = here.to_vec();
            let mut rest = path;
            while let Some((first, tail)) = rest.split_first() {
                match first.as_str() {
                    // Above the top of `lock/`: the rest of the crate.
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = tail;
            }
            base.extend_from_slice(rest);
            Some(base)
        }
        // A bare name is a child module only when more follows (`guard::X`, not a local).
        [first, _, ..] => {
            let child = [here, std::slice::from_ref(first)].concat().join("::");
            modules.contains(&child).then(|| [here, path].concat())
        }
        _ => None,
    }
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
            .filter(|other| reach.get(other).is_some_and(|r| r.contains(*module)))
            .cloned()
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

/// True for the attributes of test-only code: `#[cfg(test)]`, `#[test]`.
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let cfg_test = attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test");
        cfg_test || attr.path().is_ident("test")
    })
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn impl_item_attrs(item: &ImplItem) -> &[Attribute] {
    match item {
        ImplItem::Const(i) => &i.attrs,
        ImplItem::Fn(i) => &i.attrs,
        ImplItem::Type(i) => &i.attrs,
        ImplItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn names(modules: &[&str]) -> BTreeSet<String> {
    modules.iter().map(|s| (*s).to_owned()).collect()
}

fn segments(path: &str) -> Segments {
    path.split("::").map(str::to_owned).collect()
}

#[test]
fn no_module_of_lock_imports_one_that_imports_it_back() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lock");
    let graph = graph(&dir);
    assert!(graph.len() > 15, "lock/ read: {graph:?}");
    // The reader sees real imports (else an empty graph would pass): a plain one, a grouped
    // one (`use crate::lock::identity::{owner_id, HoldIdentity}`), a `super::` one.
    assert!(graph["acquire"].contains("engine"), "{graph:?}");
    assert!(graph["multi::at_once"].contains("identity"), "{graph:?}");
    let request = &graph["multi::request"];
    assert!(request.contains("multi::guard"), "{graph:?}");
    assert_eq!(circles(&graph), Vec::<BTreeSet<String>>::new(), "{graph:?}");
}

#[test]
fn a_circle_is_found_and_named() {
    let edges = [
        ("engine", "registry"),
        ("registry", "held"),
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
    assert_eq!(
        circles(&graph),
        vec![names(&["engine", "held", "registry"])]
    );
}

#[test]
fn a_grouped_import_circle_is_found_and_named() {
    let sources: BTreeMap<String, String> = [
        // Grouped and nested: `registry` names `held` and `engine` in one import.
        (
            "registry",
            "use crate::lock::{held::{Acquired, Held}, engine::Engine};",
        ),
        ("held", "use crate::lock::{time::later, registry::{self}};"),
        ("engine", "use super::{config::Config};"),
        ("config", ""),
        ("time", ""),
    ]
    .into_iter()
    .map(|(module, source)| (module.to_owned(), source.to_owned()))
    .collect();
    let graph = graph_of(&sources);
    assert_eq!(graph["registry"], names(&["held", "engine"]), "{graph:?}");
    assert_eq!(graph["held"], names(&["time", "registry"]), "{graph:?}");
    assert_eq!(graph["engine"], names(&["config"]), "{graph:?}");
    assert_eq!(circles(&graph), vec![names(&["held", "registry"])]);
}

#[test]
fn tests_are_left_out_and_the_code_after_them_is_read() {
    let guard = r#"
        impl LockGuard {
            #[cfg(test)]
            fn fixture() -> Self { crate::lock::request::fixture() }

            pub(super) fn of(held: &crate::lock::held::Held) {}
        }

        #[cfg(test)]
        mod tests {
            use crate::lock::request::LockRequest;
        }

        macro_rules! setters {
            () => { $crate::lock::options::RequestOptions::new() };
        }

        fn after() {
            tracing::debug!(count = %n, "{}", crate::lock::scope::current());
        }
    "#;
    let sources: BTreeMap<String, String> = [
        ("guard", guard),
        ("request", "use crate::lock::guard::LockGuard;"),
        ("held", ""),
        ("options", ""),
        ("scope", ""),
    ]
    .into_iter()
    .map(|(module, source)| (module.to_owned(), source.to_owned()))
    .collect();
    let graph = graph_of(&sources);
    // `request` only from tests; the rest from code after them, macro bodies included.
    assert_eq!(
        graph["guard"],
        names(&["held", "options", "scope"]),
        "{graph:?}"
    );
    assert_eq!(circles(&graph), Vec::<BTreeSet<String>>::new());
}

#[test]
fn visibility_is_no_import() {
    let sources: BTreeMap<String, String> = [
        ("multi", "mod at_once; pub use at_once::AtOnce;"),
        ("multi::at_once", "pub(super) struct AtOnce;"),
    ]
    .into_iter()
    .map(|(module, source)| (module.to_owned(), source.to_owned()))
    .collect();
    let graph = graph_of(&sources);
    assert_eq!(graph["multi"], names(&["multi::at_once"]), "{graph:?}");
    assert_eq!(graph["multi::at_once"], names(&[]), "{graph:?}");
}

#[test]
fn paths_resolve_from_where_they_are_written() {
    let modules = names(&["multi", "multi::guard", "multi::at_once", "guard", "engine"]);
    let resolve = |here: &str, path: &str| resolve(&modules, &segments(here), &segments(path));
    // In `multi/request.rs`, `super::` is `multi`.
    let found = resolve("multi::request", "super::guard::MultiLockGuard");
    assert_eq!(found.as_deref(), Some("multi::guard"));
    assert_eq!(
        resolve("multi::request", "crate::lock::guard::LockGuard").as_deref(),
        Some("guard")
    );
    // In `multi/mod.rs`, `guard::` is its child; elsewhere a bare `guard` is no module.
    assert_eq!(
        resolve("multi", "guard::MultiLost").as_deref(),
        Some("multi::guard")
    );
    assert_eq!(resolve("engine", "guard::MultiLost"), None);
    // `super::super::` from `multi::request` is the top of `lock/`; one more leaves it.
    assert_eq!(
        resolve("multi::request", "super::super::engine::Engine").as_deref(),
        Some("engine")
    );
    assert_eq!(resolve("engine", "super::super::engine"), None);
    assert_eq!(resolve("engine", "crate::protocol::lock_calls"), None);
}
