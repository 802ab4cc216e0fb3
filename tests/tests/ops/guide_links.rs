//! The repository's Markdown, read on GitHub (README.md, SAFETY.md, BENCHMARKS.md, docs/,
//! each crate's README), links the guide on docs.rs, never its `.md` sources: those are the
//! pages of `lock_core::guide`, written for rustdoc, whose `crate::…` links are dead where
//! GitHub shows the file.

use std::path::{Path, PathBuf};

/// Where the guide's sources are, from the workspace root.
const GUIDE: &str = "lock-core/src/guide";

/// The link targets of `markdown` that name a `.md` file of the guide: inline links
/// (`[text](target)`) and reference definitions (`[name]: target`), anchors ignored.
fn guide_source_links(markdown: &str) -> Vec<String> {
    let inline = markdown.split("](").skip(1).filter_map(|rest| {
        let end = rest.find(')')?;
        Some(&rest[..end])
    });
    let definitions = markdown.lines().filter_map(|line| {
        let line = line.trim_start();
        let (label, target) = line.strip_prefix('[')?.split_once("]:")?;
        (!label.is_empty()).then(|| target.trim())
    });
    inline
        .chain(definitions)
        .filter(|target| {
            let file = target.split('#').next().unwrap_or_default();
            file.contains("guide/") && file.ends_with(".md")
        })
        .map(str::to_owned)
        .collect()
}

/// Every `.md` file under `dir`, build output and the guide's own sources left out.
fn markdown_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            let skipped = ["target", ".git", "node_modules"].contains(&name);
            if !skipped && path != root.join(GUIDE) {
                markdown_files(root, &path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn markdown_read_on_github_links_the_guide_on_docs_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    markdown_files(&root, &root, &mut files);
    let readme = root.join("README.md");
    assert!(files.contains(&readme), "{files:?}");
    // The README does link the guide (else a README without links would pass).
    let text = std::fs::read_to_string(&readme).expect("README.md");
    assert!(text.contains("https://docs.rs/lock-core/latest/lock_core/guide/"));
    let stale: Vec<(PathBuf, Vec<String>)> = (files.into_iter())
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("a readable file");
            (file, guide_source_links(&text))
        })
        .filter(|(_, links)| !links.is_empty())
        .collect();
    assert!(stale.is_empty(), "links to the guide's sources: {stale:?}");
}

#[test]
fn a_link_to_a_guide_source_is_found() {
    let markdown = "\
The [operating chapter](lock-core/src/guide/operating.md#least-privilege), the
[macro][m], and [on docs.rs](https://docs.rs/lock-core/latest/lock_core/guide/macro_/index.html).

[m]: ../lock-core/src/guide/macro.md
[other]: SAFETY.md
";
    assert_eq!(
        guide_source_links(markdown),
        [
            "lock-core/src/guide/operating.md#least-privilege",
            "../lock-core/src/guide/macro.md"
        ]
    );
}
