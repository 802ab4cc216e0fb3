//! The shipped library on the model and on real servers: the same functions with the same
//! flags, and the same replies to a few calls (modulo what derives from TIME).

mod support;

use std::collections::BTreeMap;

use lock_model::{Node, Reply, Runtime, SHIPPED_LIBRARY};

/// `FUNCTION LIST`'s functions and flags (RESP2: flat key-value arrays).
fn listed(reply: Reply) -> BTreeMap<String, Vec<String>> {
    fn field<'a>(pairs: &'a [Reply], name: &str) -> &'a Reply {
        let at = pairs
            .iter()
            .position(|r| *r == Reply::bulk(name))
            .unwrap_or_else(|| panic!("no `{name}` in {pairs:?}"));
        &pairs[at + 1]
    }
    let text = |r: &Reply| match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Status(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    };
    let Reply::Array(libraries) = reply else {
        panic!("not an array")
    };
    let mut out = BTreeMap::new();
    for library in libraries {
        let Reply::Array(library) = library else {
            panic!()
        };
        let Reply::Array(functions) = field(&library, "functions") else {
            panic!()
        };
        for function in functions {
            let Reply::Array(function) = function else {
                panic!()
            };
            let Reply::Array(flags) = field(function, "flags") else {
                panic!()
            };
            let mut flags: Vec<_> = flags.iter().map(text).collect();
            flags.sort();
            out.insert(text(field(function, "name")), flags);
        }
    }
    out
}

#[test]
fn the_model_registers_what_redis_registers() {
    let rt = Runtime::new();
    let mut node = Node::new(0);
    node.load(&rt, SHIPPED_LIBRARY).unwrap();
    let library = node.libraries().next().unwrap();
    let model: BTreeMap<String, Vec<String>> = library
        .functions()
        .iter()
        .map(|f| {
            let mut flags = f.flags.clone();
            flags.sort();
            (f.name.clone(), flags)
        })
        .collect();
    for mut real in support::servers() {
        let loaded: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(SHIPPED_LIBRARY)
            .query(&mut real.connection)
            .unwrap();
        assert_eq!(loaded, library.name());
        let list = support::reply_of(
            redis::cmd("FUNCTION")
                .arg("LIST")
                .query(&mut real.connection),
        );
        assert_eq!(listed(list), model, "on {}", real.label);
    }
}

/// The letter the prelude gives a kind (`local READ = 'r'`).
fn letter(kind: &str) -> String {
    let line = SHIPPED_LIBRARY
        .lines()
        .find(|l| l.starts_with(&format!("local {kind} = '")))
        .expect("the prelude names the kinds");
    line.split('\'').nth(1).unwrap().to_owned()
}

/// A reply with what derives from TIME replaced: fencing tokens (integers above 10^15, or
/// a record's leading digits) and TTLs (integers up to the lease).
fn normalised(reply: &Reply) -> Reply {
    match reply {
        Reply::Int(n) if *n > 1_000_000_000_000_000 => Reply::bulk("TOKEN"),
        Reply::Int(n) if (1..=30_000).contains(n) && *n > 3 => Reply::bulk("TTL"),
        Reply::Bulk(b) if b.first().is_some_and(u8::is_ascii_digit) && b.contains(&31) => {
            let rest = b.iter().skip_while(|c| c.is_ascii_digit()).copied();
            Reply::Bulk(b"TOKEN".iter().copied().chain(rest).collect())
        }
        Reply::Array(items) => Reply::Array(items.iter().map(normalised).collect()),
        // Valkey leaves the function's name out of the error's location.
        Reply::Error(message) => {
            Reply::Error(message.split(" script:").next().unwrap_or("").to_owned())
        }
        other => other.clone(),
    }
}

#[test]
fn a_few_calls_answer_as_redis_answers() {
    let rt = Runtime::new();
    let prefix = format!(
        "{}_",
        SHIPPED_LIBRARY
            .lines()
            .next()
            .unwrap()
            .trim_start_matches("#!lua name=")
    );
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (exclusive, read, permit) = (letter("EXCLUSIVE"), letter("READ"), letter("PERMIT"));
    let calls: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "acquire",
            vec!["l", "l:q"],
            vec!["30000", "a:1", "", "10000", "publish"],
        ),
        (
            "acquire",
            vec!["l", "l:q"],
            vec!["30000", "a:1", "", "10000", "publish"],
        ),
        (
            "acquire",
            vec!["l", "l:q"],
            vec!["30000", "b:1", "svc\u{1f}host", "10000", "publish"],
        ),
        ("inspect", vec!["l", "l:q"], vec![]),
        (
            "release",
            vec!["l", "l:q"],
            vec!["b:1", "30000", "publish", "svc\u{1f}host"],
        ),
        ("release", vec!["l", "l:q"], vec!["a:1", "30000", "publish"]),
        ("release", vec!["l", "l:q"], vec!["a:1", "30000", "publish"]),
        (
            "acquire_cluster",
            vec!["{m}", "{m}:q"],
            vec!["30000", "c:1", "", "10000", "spublish"],
        ),
        (
            "rw_acquire",
            vec!["rw", "rw:q"],
            vec!["30000", "r:1", "", "10000", "publish", "read"],
        ),
        (
            "rw_acquire",
            vec!["rw", "rw:q"],
            vec!["30000", "w:1:write", "", "10000", "publish", "write"],
        ),
        (
            "sem_acquire",
            vec!["s", "s:q", "s:h"],
            vec!["30000", "p:1", "", "10000", "publish", "1"],
        ),
        (
            "sem_acquire",
            vec!["s", "s:q", "s:h"],
            vec!["30000", "p:2", "", "10000", "publish", "1"],
        ),
        (
            "renew",
            vec!["l", "rw", "s"],
            vec![
                "a:1", "30000", &exclusive, "r:1", "30000", &read, "p:1", "30000", &permit,
            ],
        ),
        // A kind no renewer knows: a Lua error, with its line.
        ("renew", vec!["l"], vec!["a:1", "30000", "?"]),
        ("missing_function", vec![], vec![]),
    ];
    let to_bytes = |items: &[&str]| {
        items
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    for mut real in support::servers() {
        redis::cmd("FLUSHALL")
            .query::<()>(&mut real.connection)
            .unwrap();
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(SHIPPED_LIBRARY)
            .query::<String>(&mut real.connection)
            .unwrap();
        let mut node = Node::new(epoch);
        node.load(&rt, SHIPPED_LIBRARY).unwrap();
        for (function, keys, args) in &calls {
            let name = format!("{prefix}{function}");
            let ro = *function == "inspect";
            let mut cmd = redis::cmd(if ro { "FCALL_RO" } else { "FCALL" });
            cmd.arg(&name).arg(keys.len()).arg(keys).arg(args);
            let answer = support::reply_of(cmd.query(&mut real.connection));
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
                - epoch;
            let model = if ro {
                node.fcall_ro(&rt, &name, &to_bytes(keys), &to_bytes(args), at)
            } else {
                node.fcall(&rt, &name, &to_bytes(keys), &to_bytes(args), at)
            }
            .unwrap()
            .reply;
            assert_eq!(
                normalised(&model),
                normalised(&answer),
                "{function} on {}: model {model:?}, server {answer:?}",
                real.label
            );
        }
    }
}

#[test]
fn redissons_scripts_answer_as_redis_answers() {
    use distlock_examples::redisson_scripts as scripts;
    let rt = Runtime::new();
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let calls: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (scripts::LOCK, vec!["l"], vec!["30000", "o:1"]),
        (scripts::LOCK, vec!["l"], vec!["30000", "o:1"]),
        (scripts::LOCK, vec!["l"], vec!["30000", "o:2"]),
        (scripts::RENEW, vec!["l"], vec!["30000", "o:1"]),
        (
            scripts::UNLOCK,
            vec!["l", "redisson_lock__channel:{l}", "latch:1"],
            vec!["0", "30000", "o:1", "PUBLISH", "13500"],
        ),
        (
            scripts::UNLOCK,
            vec!["l", "redisson_lock__channel:{l}", "latch:2"],
            vec!["0", "30000", "o:1", "PUBLISH", "13500"],
        ),
        (
            scripts::UNLOCK,
            vec!["l", "redisson_lock__channel:{l}", "latch:2"],
            vec!["0", "30000", "o:1", "PUBLISH", "13500"],
        ),
        (
            scripts::READ_LOCK,
            vec!["rw", "{rw}:r:1:rwlock_timeout"],
            vec!["30000", "r:1", "r:1:write"],
        ),
        (
            scripts::READ_LOCK,
            vec!["rw", "{rw}:r:2:rwlock_timeout"],
            vec!["30000", "r:2", "r:2:write"],
        ),
        (scripts::WRITE_LOCK, vec!["rw"], vec!["30000", "w:1:write"]),
        (
            scripts::READ_UNLOCK,
            vec![
                "rw",
                "redisson_rwlock:{rw}",
                "{rw}:r:1:rwlock_timeout",
                "{rw}",
                "latch:3",
            ],
            vec!["0", "r:1", "PUBLISH", "13500"],
        ),
        (
            scripts::READ_UNLOCK,
            vec![
                "rw",
                "redisson_rwlock:{rw}",
                "{rw}:r:2:rwlock_timeout",
                "{rw}",
                "latch:4",
            ],
            vec!["0", "r:2", "PUBLISH", "13500"],
        ),
        (scripts::WRITE_LOCK, vec!["rw"], vec!["30000", "w:1:write"]),
        (scripts::WRITE_LOCK, vec!["rw"], vec!["30000", "w:1:write"]),
        (
            scripts::WRITE_UNLOCK,
            vec!["rw", "redisson_rwlock:{rw}", "latch:5"],
            vec!["1", "30000", "w:1:write", "PUBLISH", "13500"],
        ),
        (
            scripts::WRITE_UNLOCK,
            vec!["rw", "redisson_rwlock:{rw}", "latch:6"],
            vec!["1", "30000", "w:1:write", "PUBLISH", "13500"],
        ),
    ];
    let to_bytes = |items: &[&str]| {
        items
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    for mut real in support::servers() {
        redis::cmd("FLUSHALL")
            .query::<()>(&mut real.connection)
            .unwrap();
        let mut node = Node::new(epoch);
        for (n, (script, keys, args)) in calls.iter().enumerate() {
            let answer = support::reply_of(
                redis::cmd("EVAL")
                    .arg(*script)
                    .arg(keys.len())
                    .arg(keys)
                    .arg(args)
                    .query(&mut real.connection),
            );
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
                - epoch;
            let model = node
                .eval(&rt, script, &to_bytes(keys), &to_bytes(args), at)
                .unwrap()
                .reply;
            assert_eq!(
                normalised(&model),
                normalised(&answer),
                "call {n} on {}: model {model:?}, server {answer:?}",
                real.label
            );
        }
    }
}
