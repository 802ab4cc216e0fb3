//! The model's commands are exactly those the library, Redisson's scripts and the
//! guarded-write workload call: read from their texts, both ways.

use std::collections::BTreeSet;

use distlock_examples::redisson_scripts;
use lock_model::{Command, SHIPPED_LIBRARY};

/// Call sites whose command is a variable, and what it can be: the publish command a
/// client passes (`PUBLISH`, or `SPUBLISH` on a sharded Cluster), PUBSUB's count for it,
/// and the commands of the guarded-write workload the explorer runs.
const VARIABLE_SITES: &[(&str, &[&str])] = &[
    ("redis.call(publish", &["publish", "spublish"]),
    (
        "redis.call('pubsub', count",
        &["pubsub numsub", "pubsub shardnumsub"],
    ),
    ("redis.pcall(unpack(args", &["set", "incr", "get", "del"]),
    ("redis.call(ARGV[3]", &["publish", "spublish"]),
    ("redis.call(ARGV[4]", &["publish", "spublish"]),
];

/// Every `redis.call(` / `redis.pcall(` of `text`: a command name, or a variable site.
fn calls(text: &str, names: &mut BTreeSet<String>, sites: &mut BTreeSet<String>) {
    for start in ["redis.call(", "redis.pcall("] {
        for (at, _) in text.match_indices(start) {
            let rest = &text[at + start.len()..];
            let first = rest.split([',', ')']).next().unwrap_or("").trim();
            let quoted = first.trim_matches(['\'', '"']);
            if first.starts_with(['\'', '"']) && quoted.to_lowercase() != "pubsub" {
                names.insert(quoted.to_lowercase());
                continue;
            }
            let site = if quoted.eq_ignore_ascii_case("pubsub") {
                let second = rest.split(',').nth(1).unwrap_or("").trim();
                format!("{start}'pubsub', {second}")
            } else {
                format!("{start}{first}")
            };
            sites.insert(site);
        }
    }
}

#[test]
fn the_model_knows_every_command_called_and_nothing_else() {
    let mut names = BTreeSet::new();
    let mut sites = BTreeSet::new();
    calls(SHIPPED_LIBRARY, &mut names, &mut sites);
    for script in [
        redisson_scripts::LOCK,
        redisson_scripts::UNLOCK,
        redisson_scripts::RENEW,
        redisson_scripts::READ_LOCK,
        redisson_scripts::READ_UNLOCK,
        redisson_scripts::WRITE_LOCK,
        redisson_scripts::WRITE_UNLOCK,
    ] {
        calls(script, &mut names, &mut sites);
    }
    let known_sites: BTreeSet<String> = VARIABLE_SITES.iter().map(|(s, _)| s.to_string()).collect();
    assert_eq!(
        sites, known_sites,
        "a call site whose command is a variable is new or gone"
    );
    for (_, commands) in VARIABLE_SITES {
        names.extend(commands.iter().map(|c| c.to_string()));
    }
    let model: BTreeSet<String> = Command::ALL.iter().map(|c| c.name().to_owned()).collect();
    let unknown: Vec<_> = names.difference(&model).collect();
    assert!(unknown.is_empty(), "called but not modelled: {unknown:?}");
    let unused: Vec<_> = model.difference(&names).collect();
    assert!(unused.is_empty(), "modelled but never called: {unused:?}");
    // The control: a command outside both lists is caught.
    let mut mutant_names = BTreeSet::new();
    calls("redis.call('lpush', k, v)", &mut mutant_names, &mut sites);
    assert!(mutant_names.iter().all(|n| !model.contains(n)));
    for name in &names {
        let words: Vec<Vec<u8>> = name.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        assert_eq!(
            Command::lookup(&words).map(Command::name),
            Some(name.as_str())
        );
    }
}
