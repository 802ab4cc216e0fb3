//! Each published package carries its license files: `cargo package` ships a crate's
//! directory, not the workspace root, so every package that is not `publish = false` has
//! LICENSE-MIT and LICENSE-APACHE of its own (links to the root's), with the root's text.

use std::path::Path;

/// The license files every published package carries.
const LICENSES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// The workspace's members, from the root manifest's `members = [...]`.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let line = (manifest.lines())
        .find_map(|line| line.strip_prefix("members = ["))
        .expect("a one-line members list");
    let list = line.trim_end_matches(']');
    (list.split(','))
        .map(|member| member.trim().trim_matches('"').to_owned())
        .filter(|member| !member.is_empty())
        .collect()
}

/// The license files `package` lacks, or whose text is not the root's.
fn missing_licenses(root: &Path, package: &Path) -> Vec<&'static str> {
    let text = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(file)).ok();
    (LICENSES.into_iter())
        .filter(|file| text(package, file).is_none() || text(package, file) != text(root, file))
        .collect()
}

#[test]
fn every_published_package_carries_its_license_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let published: Vec<String> = (members(&root).into_iter())
        .filter(|member| {
            let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml"));
            !manifest
                .expect("a member's manifest")
                .contains("\npublish = false")
        })
        .collect();
    assert!(published.contains(&"lock-core".to_owned()), "{published:?}");
    let lacking: Vec<(&String, Vec<&str>)> = (published.iter())
        .map(|member| (member, missing_licenses(&root, &root.join(member))))
        .filter(|(_, missing)| !missing.is_empty())
        .collect();
    assert!(
        lacking.is_empty(),
        "packages without their license files: {lacking:?}"
    );
}

/// The control: an unpublished package, which carries none, is found lacking both.
#[test]
fn a_package_without_license_files_is_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    assert_eq!(missing_licenses(&root, &root.join("tests")), LICENSES);
}
