//! Without a Redis, every example and the `distlock` CLI say so — naming Redis and the URL
//! (never its password) and what to do — and exit non-zero at once instead of printing a
//! bare `Connection refused` or hanging.
//!
//! Locating the binaries: `env!("CARGO_BIN_EXE_…")` exists only for `[[bin]]` targets of
//! the test's own package, and examples and the CLI belong to other packages. Paths guessed
//! from this test's own location could name binaries a previous build left behind, so the
//! test asks cargo itself: it runs `$CARGO build --message-format=json` for exactly those
//! targets (a no-op when the workspace's `cargo test` built them already, and cargo holds
//! no lock while tests run) and takes each executable's path from cargo's report. The
//! message's wording is unit-tested in the examples' lib (`check_reachable`) and the CLI.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use distlock_tests::ClosedPort;

/// How long a binary may take to give up; it should take milliseconds.
const BOUND: Duration = Duration::from_secs(60);

/// The examples (and the benchmark) that talk to Redis, with the arguments they are run with
/// here.
const EXAMPLES: &[(&str, &[&str])] = &[
    ("axum_inventory", &[]),
    ("axum_inventory", &["--demo"]),
    ("axum_payments", &[]),
    ("axum_payments", &["--demo"]),
    ("tonic_orders", &[]),
    ("macro_basic", &[]),
    ("macro_axum", &[]),
    ("quickstart", &[]),
    ("rwlock", &[]),
    ("semaphore", &[]),
    ("transfer", &[]),
    ("oversell", &[]),
    ("bench", &[]),
];

#[test]
fn examples_name_the_missing_redis() {
    for &(example, args) in EXAMPLES {
        let (port, out) = run_against_closed_port(&binaries()[example], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{example} {args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot reach Redis at redis://127.0.0.1:{port} (connection refused); \
                 set REDIS_URL or start redis-server"
            )),
            "{what}"
        );
        assert!(!out.status.success(), "{what}");
        assert!(
            !stderr.contains("s3cret"),
            "the password was printed: {what}"
        );
    }
}

/// No Redis the user did not name: without `REDIS_URL`, the examples whose instances share
/// one Redis ask for it (they used to take whatever answered on 127.0.0.1:6379), and a
/// self-contained one starts its private server on a free port.
#[test]
fn without_redis_url_no_found_redis_is_used() {
    for example in ["axum_inventory", "axum_payments"] {
        let mut command = Command::new(&binaries()[example]);
        command.env_remove("REDIS_URL").stdin(Stdio::null());
        let out = output_within(command, BOUND);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{example}: {stderr}");
        assert!(
            stderr.contains("set REDIS_URL to the Redis the instances share"),
            "{example}: {stderr}"
        );
    }
    let mut command = Command::new(&binaries()["quickstart"]);
    command.env_remove("REDIS_URL").stdin(Stdio::null());
    let out = output_within(command, BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quickstart: {stderr}");
    assert!(
        stderr.contains("started a private redis-server on redis://127.0.0.1:")
            && !stderr.contains(":6379"),
        "quickstart: {stderr}"
    );
}

#[test]
fn cli_names_the_missing_redis() {
    for args in [
        &["list"][..],
        &["inspect", "item_7"],
        &["watch", "--count", "1"],
    ] {
        let (port, out) = run_against_closed_port(&binaries()["distlock"], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("distlock {args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot reach Redis at redis://127.0.0.1:{port} (connection refused); \
                 pass --url or set REDIS_URL"
            )),
            "{what}"
        );
        assert!(!out.status.success(), "{what}");
        assert!(
            !stderr.contains("s3cret"),
            "the password was printed: {what}"
        );
        assert!(
            !stderr.contains("distlock:*"),
            "names a lock, not the server: {what}"
        );
    }
}

/// Runs `bin args` with `REDIS_URL` (user and password included) pointing at a loopback
/// port nothing listens on; returns the port and the output, failing past [`BOUND`].
fn run_against_closed_port(bin: &Path, args: &[&str]) -> (u16, Output) {
    let closed = ClosedPort::bind();
    let port = closed.port();
    let mut command = Command::new(bin);
    command
        .args(args)
        .env("REDIS_URL", format!("redis://ops:s3cret@127.0.0.1:{port}"))
        .stdin(Stdio::null());
    (port, output_within(command, BOUND))
}

/// Runs `command` to completion, killing it and failing the test after `bound`.
fn output_within(mut command: Command, bound: Duration) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let pid = child.id();
    let (done, output) = mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let started = Instant::now();
    match output.recv_timeout(bound) {
        Ok(output) => output.unwrap_or_else(|e| panic!("{command:?}: {e}")),
        Err(_) => {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("{command:?} still ran after {:?}", started.elapsed())
        }
    }
}

/// The examples' and the CLI's executables by target name, built once per test binary.
fn binaries() -> &'static HashMap<String, PathBuf> {
    static BINARIES: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    BINARIES.get_or_init(build_binaries)
}

fn build_binaries() -> HashMap<String, PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    // The tests package is selected too, so features unify as in the workspace's own
    // build and nothing is compiled twice.
    // Without the variables cargo sets for this test (CARGO_PKG_NAME, CARGO_MANIFEST_DIR,
    // …): build scripts (ring's, through cc) rerun when they change, and the workspace's
    // own build, made without them, would then be rebuilt each time.
    for (name, _) in std::env::vars_os() {
        if set_by_cargo_for_tests(&name.to_string_lossy()) {
            command.env_remove(name);
        }
    }
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--message-format=json-render-diagnostics"])
        .args([
            "-p",
            "distlock-tests",
            "-p",
            "distlock-examples",
            "-p",
            "distlock-bench",
            "-p",
            "distlock-cli",
        ])
        .args(["--examples", "--bins"]);
    if built_with_release() {
        command.arg("--release");
    }
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed");
    let mut binaries = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            binaries.insert(name.to_owned(), PathBuf::from(exe));
        }
    }
    for name in EXAMPLES.iter().map(|(name, _)| *name).chain(["distlock"]) {
        assert!(
            binaries.contains_key(name),
            "cargo built no `{name}`: {binaries:?}"
        );
    }
    binaries
}

/// Variables cargo sets for a test process only (not for itself when run from a shell).
fn set_by_cargo_for_tests(name: &str) -> bool {
    const PREFIXES: [&str; 5] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_CFG_",
    ];
    const NAMES: [&str; 4] = [
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

/// True when this test binary is a release build (`target/release/deps/…`).
fn built_with_release() -> bool {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|profile| profile == "release")
}
