//! The repository's Markdown, read on GitHub (README.md, SAFETY.md, BENCHMARKS.md, docs/,
//! each crate's README), links the guide on docs.rs, never its `.md` sources: those are the
//! pages of `lock_core::guide`, written for rustdoc, whose `crate::…` links are dead where
//! GitHub shows the file. docs.rs serves the guide only once the crates are published, so
//! the choice is held three ways: each docs.rs link names a chapter the guide has (and one
//! of its headings, for an anchor), so it works from the first publish on; the README says,
//! beside its links, how to read the guide before that (`cargo doc … --open`); and no file
//! links the sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the guide's sources are, from the workspace root.
const GUIDE: &str = "lock-core/src/guide";

/// What a link to the guide on docs.rs starts with.
const DOCS_RS_GUIDE: &str = "https://docs.rs/lock-core/latest/lock_core/guide/";

/// What the README tells a reader to run to read the guide before the first publish.
const READ_LOCALLY: &str = "cargo doc -p lock-core --all-features --open";

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

/// The guide's chapters: each module of `guide/mod.rs` (`pub mod name {}`), with the text
/// of the Markdown files its `#[doc = include_str!("…")]` lines include.
fn chapters(root: &Path) -> BTreeMap<String, String> {
    let guide = root.join(GUIDE);
    let source = std::fs::read_to_string(guide.join("mod.rs")).expect("guide/mod.rs");
    let mut chapters = BTreeMap::new();
    let mut text = String::new();
    for line in source.lines().map(str::trim) {
        let included = line
            .strip_prefix("#[doc = include_str!(\"")
            .and_then(|rest| rest.strip_suffix("\")]"));
        let module = line
            .strip_prefix("pub mod ")
            .and_then(|rest| rest.strip_suffix(" {}"));
        if let Some(file) = included {
            text.push_str(&std::fs::read_to_string(guide.join(file)).expect("an included file"));
            text.push('\n');
        } else if let Some(name) = module {
            chapters.insert(name.to_owned(), std::mem::take(&mut text));
        }
    }
    chapters
}

/// The anchors rustdoc gives the headings of `markdown` (code blocks left out): lower case,
/// words joined by `-`, punctuation dropped.
fn anchors(markdown: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let heading = line.strip_prefix('#').filter(|_| !in_code);
        let Some(heading) = heading else { continue };
        let words = heading.trim_start_matches('#').trim().to_lowercase();
        let kept: String = (words.chars())
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .collect();
        out.push(kept.split_whitespace().collect::<Vec<_>>().join("-"));
    }
    out
}

/// The docs.rs guide links of `markdown` that would not work once published: a chapter
/// the guide does not have, or an anchor that none of its headings gets.
fn broken_docs_rs_links(markdown: &str, chapters: &BTreeMap<String, String>) -> Vec<String> {
    let links = markdown.split(DOCS_RS_GUIDE).skip(1).map(|rest| {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == ')' || c == '>')
            .unwrap_or(rest.len());
        rest[..end].trim_end_matches(['.', ','])
    });
    let works = |link: &str| {
        let (page, anchor) = link.split_once('#').unwrap_or((link, ""));
        let chapter = page.trim_end_matches("index.html").trim_end_matches('/');
        chapters.get(chapter).is_some_and(|text| {
            anchor.is_empty() || anchors(text).iter().any(|found| found == anchor)
        })
    };
    (links.filter(|link| !works(link)))
        .map(|link| format!("{DOCS_RS_GUIDE}{link}"))
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
    // The README does link the guide (else a README without links would pass), and says
    // how to read it before docs.rs has it.
    let text = std::fs::read_to_string(&readme).expect("README.md");
    assert!(text.contains(DOCS_RS_GUIDE));
    assert!(
        text.contains(READ_LOCALLY),
        "how to read the guide before the publish"
    );
    let chapters = chapters(&root);
    assert!(chapters.contains_key("operating"), "{:?}", chapters.keys());
    let read = |file: &PathBuf| std::fs::read_to_string(file).expect("a readable file");
    let broken: Vec<(&PathBuf, Vec<String>)> = (files.iter())
        .map(|file| (file, broken_docs_rs_links(&read(file), &chapters)))
        .filter(|(_, links)| !links.is_empty())
        .collect();
    assert!(
        broken.is_empty(),
        "docs.rs links that will not work: {broken:?}"
    );
    let stale: Vec<(&PathBuf, Vec<String>)> = (files.iter())
        .map(|file| (file, guide_source_links(&read(file))))
        .filter(|(_, links)| !links.is_empty())
        .collect();
    assert!(stale.is_empty(), "links to the guide's sources: {stale:?}");
}

/// The control: a chapter the guide lacks, or an anchor none of its headings gets (a `#`
/// line in a code block is no heading), is reported; the chapter and heading it has are
/// not.
#[test]
fn a_docs_rs_link_to_no_chapter_or_heading_is_found() {
    let text = "# Operating\n## Least privilege\n```text\n# not a heading\n```\n";
    let chapters = BTreeMap::from([("operating".to_owned(), text.to_owned())]);
    let markdown = format!(
        "[a]({DOCS_RS_GUIDE}operating/index.html#least-privilege), \
         [b]({DOCS_RS_GUIDE}operating/index.html), [c]({DOCS_RS_GUIDE}operatin/index.html), \
         [d]({DOCS_RS_GUIDE}operating/index.html#not-a-heading)"
    );
    assert_eq!(
        broken_docs_rs_links(&markdown, &chapters),
        [
            format!("{DOCS_RS_GUIDE}operatin/index.html"),
            format!("{DOCS_RS_GUIDE}operating/index.html#not-a-heading"),
        ]
    );
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
