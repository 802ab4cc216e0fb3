//! `distlock exec` end to end: real `distlock` processes running real commands (`sh`
//! scripts) against a private redis-server. What the commands saw and when they ran is read
//! from the files they write; every wait is on such an event or a process's exit, bounded.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use lock_core::{LockClient, LockGuard};
use lock_testkit::{ClosedPort, RedisServer, TempDir};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

const GENEROUS: Duration = Duration::from_secs(10);

/// A `sh` script that can call `until_exists FILE`: waits for FILE to exist, polling, for
/// 10 s at most (every loop of a test is bounded).
macro_rules! script {
    ($body:literal) => {
        concat!(
            r#"until_exists() { n=0; while [ ! -e "$1" ] && [ "$n" -lt 500 ]; do sleep 0.02; n=$((n + 1)); done; }"#,
            "\n",
            $body
        )
    };
}

/// A command's script: appends `start ID` to the log, waits for the file `go-ID` next to
/// it, appends `end ID`. Arguments: log, ID.
const MARKER: &str = script!(
    r#"echo "start $2" >> "$1"; until_exists "$(dirname "$1")/go-$2"; echo "end $2" >> "$1""#
);

/// Starts `distlock --url <redis> exec <options> -- <command>` (the options end with the
/// lock's name).
fn exec(redis: &RedisServer, options: &[&str], command: &[&str]) -> Child {
    distlock_command(redis, &[&["exec"], options, &["--"], command].concat())
}

/// Starts `distlock --url <redis> <args>`, its output piped.
fn distlock_command(redis: &RedisServer, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env_remove("REDIS_URL")
        .args(["--url", &redis.url()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("distlock runs")
}

/// Waits for a started `distlock` to end, and its command's processes to close its
/// output: its status and output.
async fn finish(child: Child) -> Output {
    tokio::time::timeout(GENEROUS, child.wait_with_output())
        .await
        .expect("distlock ends")
        .unwrap()
}

/// Runs `distlock --url <redis> exec <options> -- <command>` to its end.
async fn exec_to_end(redis: &RedisServer, options: &[&str], command: &[&str]) -> Output {
    finish(exec(redis, options, command)).await
}

/// Waits until the file `path` reads as `done` says: its contents.
async fn wait_for(path: &Path, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what}: {path:?} holds {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `check` holds for the lock `name`'s state.
async fn wait_for_lock(
    client: &LockClient,
    name: &str,
    what: &str,
    check: impl Fn(&lock_core::ops::LockState) -> bool,
) {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let state = client.inspect(name).await.unwrap();
        if check(&state) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {state:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn client(redis: &RedisServer) -> LockClient {
    LockClient::builder(redis.url())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// The runs in a marker log, when they never overlapped: each `start` is followed by the
/// `end` of the same run before anything else.
fn one_at_a_time(log: &str) -> Result<usize, String> {
    let mut running = None;
    let mut runs = 0;
    for line in log.lines() {
        match (line.split_once(' '), running) {
            (Some(("start", id)), None) => running = Some(id),
            (Some(("end", id)), Some(run)) if id == run => {
                running = None;
                runs += 1;
            }
            _ => return Err(format!("runs overlap at {line:?}:\n{log}")),
        }
    }
    match running {
        None => Ok(runs),
        Some(run) => Err(format!("run {run} never ended:\n{log}")),
    }
}

/// Starts three `distlock exec` whose commands run [`MARKER`] under the names `names`, and
/// lets them go one at a time in the order they start, checking `while_one_runs` whenever
/// one has started: the log.
async fn three_markers(
    redis: &RedisServer,
    dir: &TempDir,
    names: [&str; 3],
    while_one_runs: impl AsyncFn(usize),
) -> String {
    let log = dir.path().join("log");
    let runs: Vec<Child> = (0..3)
        .map(|i| {
            let id = i.to_string();
            let script = ["sh", "-c", MARKER, "marker", path_str(&log), &id];
            exec(redis, &[names[i]], &script)
        })
        .collect();
    let mut let_go: Vec<String> = Vec::new();
    for round in 1..=3 {
        let started = |text: &str| text.matches("start").count() >= round;
        let text = wait_for(&log, "a command starts", started).await;
        while_one_runs(round).await;
        let mut starts = text.lines().filter_map(|l| l.strip_prefix("start "));
        let id = starts
            .find(|id| !let_go.iter().any(|g| g == id))
            .unwrap()
            .to_owned();
        std::fs::write(dir.path().join(format!("go-{id}")), "").unwrap();
        let_go.push(id);
    }
    for run in runs {
        let out = finish(run).await;
        assert!(out.status.success(), "{out:?}");
    }
    std::fs::read_to_string(&log).unwrap()
}

/// Three `distlock exec` on one name (three hosts' worth) run their commands one at a
/// time: while one runs, the others are queued on the lock and their commands have not
/// started. Control: on three names the same commands overlap, and the check says so.
#[tokio::test]
async fn execs_on_one_name_run_one_at_a_time() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let dir = TempDir::new("distlock-exec").unwrap();
    let log = dir.path().join("log");
    let text = three_markers(&redis, &dir, ["report"; 3], async |round| {
        let queued = 3 - round;
        let what = format!("{queued} execs queue while one command runs");
        wait_for_lock(&locks, "report", &what, |s| s.waiters() == queued).await;
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.matches("start").count(), round, "{text}");
    })
    .await;
    assert_eq!(one_at_a_time(&text), Ok(3));

    let dir = TempDir::new("distlock-exec").unwrap();
    let names = ["report_0", "report_1", "report_2"];
    let text = three_markers(&redis, &dir, names, async |_| {}).await;
    assert!(one_at_a_time(&text).is_err(), "{text}");
}

/// `--skip-if-busy` on a held lock exits at once with 75 (or `--busy-exit-code`) without
/// running the command; `--wait` exits so when its time runs out. Control: once the lock
/// is free, the same command runs.
#[tokio::test]
async fn skip_if_busy_exits_at_once_with_its_code() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let dir = TempDir::new("distlock-exec").unwrap();
    let ran = dir.path().join("ran");
    let touch = ["touch", path_str(&ran)];
    let holder = locks.lock("report").await.unwrap();
    let mut timings = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let out = exec_to_end(&redis, &["--skip-if-busy", "report"], &touch).await;
        timings.push(started.elapsed().as_millis());
        assert_eq!(out.status.code(), Some(75), "{out:?}");
        assert!(
            out.stderr.is_empty(),
            "a skip is silent (cron mails output): {out:?}"
        );
    }
    eprintln!("skip-if-busy: distlock exec started and exited in {timings:?} ms");
    let args = ["--skip-if-busy", "--busy-exit-code", "9", "report"];
    let out = exec_to_end(&redis, &args, &touch).await;
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let started = Instant::now();
    let out = exec_to_end(&redis, &["--wait", "300ms", "report"], &touch).await;
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!ran.exists(), "a busy lock runs no command");

    holder.release().await.unwrap();
    let out = exec_to_end(&redis, &["--skip-if-busy", "report"], &touch).await;
    assert!(out.status.success(), "{out:?}");
    assert!(ran.exists());
}

/// `--replicas`: a master whose replica is frozen (SIGSTOP, its link still up) still lists
/// it, so `distlock exec` at its default (`auto`) waits `--replica-timeout` for it, gives
/// the lock back and fails (125) without running the command — the issue's repro, where a
/// failover then granted the lock to a second process while the command ran. The control:
/// `--replicas off` runs it. On a server without replicas the default runs the command at
/// once, and `--replicas 1` is refused after its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sets_what_exec_waits_for() {
    let master = RedisServer::builder()
        .args(["--repl-diskless-sync-delay", "0"])
        .start();
    let replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &master.port().to_string()])
        .start();
    let deadline = Instant::now() + GENEROUS;
    // Online for the master: `WAIT 0 0` on a new connection, as distlock asks.
    while redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query_async::<u64>(&mut master.conn().await)
        .await
        .unwrap()
        == 0
    {
        assert!(Instant::now() < deadline, "the replica never came online");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dir = TempDir::new("distlock-exec").unwrap();
    let ran = dir.path().join("ran");
    let touch = ["touch", path_str(&ran)];
    replica.pause();
    let started = Instant::now();
    let out = exec_to_end(&master, &["nightly"], &touch).await;
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only 0 of 1 replicas"), "{stderr}");
    assert!(took >= Duration::from_secs(1), "refused after {took:?}");
    assert!(!ran.exists(), "ran without its replica's acknowledgement");
    let state = client(&master).inspect("nightly").await.unwrap();
    assert!(
        !state.is_held(),
        "the refused lock was left held: {state:?}"
    );
    let out = exec_to_end(&master, &["--replicas", "off", "nightly"], &touch).await;
    assert!(out.status.success(), "{out:?}");
    assert!(ran.exists());
    replica.resume();

    let lone = RedisServer::start();
    std::fs::remove_file(&ran).unwrap();
    let out = exec_to_end(&lone, &["nightly"], &touch).await;
    assert!(out.status.success(), "{out:?}");
    assert!(ran.exists());
    std::fs::remove_file(&ran).unwrap();
    let required = ["--replicas", "1", "--replica-timeout", "200ms", "nightly"];
    let out = exec_to_end(&lone, &required, &touch).await;
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!ran.exists());
}

/// The command's status is `distlock exec`'s: its exit code, 128 + the signal that killed
/// it, 127 for a command not found, 126 for one that cannot run.
#[tokio::test]
async fn the_commands_status_passes_through() {
    let redis = RedisServer::start();
    let cases: [(&[&str], i32); 6] = [
        (&["true"], 0),
        (&["sh", "-c", "exit 3"], 3),
        (&["sh", "-c", "exit 75"], 75),
        (&["sh", "-c", "kill -KILL $$"], 128 + 9),
        (&["/nonexistent/command"], 127),
        (&["/"], 126),
    ];
    for (command, code) in cases {
        let out = exec_to_end(&redis, &["status"], command).await;
        assert_eq!(out.status.code(), Some(code), "{command:?}: {out:?}");
    }
    let state = client(&redis).inspect("status").await.unwrap();
    assert!(!state.is_held(), "released after every command: {state:?}");
}

/// The command's environment names the lock and carries its fencing token: the one Redis
/// has for the hold (a permit's own with `--permits`), and the hold's mode.
#[tokio::test]
async fn the_command_gets_the_name_and_the_fencing_token() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let dir = TempDir::new("distlock-exec").unwrap();
    let env = dir.path().join("env");
    let go = dir.path().join("go");
    let script = script!(
        r#"echo "$DISTLOCK_NAME $DISTLOCK_FENCING_TOKEN $DISTLOCK_MODE" >> "$1"; until_exists "$2""#
    );
    let command = ["sh", "-c", script, "env", path_str(&env), path_str(&go)];
    for (options, name, mode) in [
        (&[][..], "report", "exclusive"),
        (&["--permits", "2"][..], "exports", "permit"),
        (&["--read"][..], "catalog", "read"),
    ] {
        let _ = std::fs::remove_file(&env);
        let _ = std::fs::remove_file(&go);
        // Two at once: a semaphore's permits and readers are held together.
        let together = if mode == "exclusive" { 1 } else { 2 };
        let runs: Vec<Child> = (0..together)
            .map(|_| exec(&redis, &[options, &[name]].concat(), &command))
            .collect();
        let lines = |t: &str| t.lines().count() == together;
        let text = wait_for(&env, "the commands start", lines).await;
        let state = locks.inspect(name).await.unwrap();
        let mut tokens: Vec<u64> = state.holders().iter().map(|h| h.fencing_token()).collect();
        tokens.sort_unstable();
        let mut seen = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!((fields[0], fields[2]), (name, mode), "{text}");
            seen.push(fields[1].parse::<u64>().unwrap());
        }
        seen.sort_unstable();
        assert_eq!(seen, tokens, "{text} vs {state:?}");
        std::fs::write(&go, "").unwrap();
        for run in runs {
            assert!(finish(run).await.status.success());
        }
    }
}

/// A forced release (`distlock release --force`) kills the command at once: SIGTERM, well
/// before the 10 s `--kill-after` would send SIGKILL; `distlock exec` exits 124. Timed over
/// several trials, from the start of `distlock release` to the end of `distlock exec`.
#[tokio::test]
async fn a_forced_release_kills_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let mut timings = Vec::new();
    for trial in 0..5 {
        let name = format!("forced_{trial}");
        let pid_file = dir.path().join(&name);
        let script = r#"echo $$ > "$1"; exec sleep 30"#;
        let command = ["sh", "-c", script, "sleeper", path_str(&pid_file)];
        let run = exec(&redis, &["--kill-after", "10s", &name], &command);
        let pid = wait_for(&pid_file, "the command starts", |t| t.ends_with('\n')).await;
        let pid = Pid::from_raw(pid.trim().parse().unwrap());
        let started = Instant::now();
        let release = finish(distlock_command(&redis, &["release", "--force", &name])).await;
        assert!(release.status.success(), "{release:?}");
        let out = finish(run).await;
        let elapsed = started.elapsed();
        timings.push(elapsed.as_millis());
        assert_eq!(out.status.code(), Some(124), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Told by the release's message, or by a renewal that found the lock gone first.
        assert!(
            stderr.contains(&format!("lock `{name}` was lost")),
            "{stderr}"
        );
        assert!(kill(pid, None).is_err(), "the command is gone");
        assert!(
            elapsed < Duration::from_secs(5),
            "{elapsed:?}: not by SIGTERM"
        );
    }
    eprintln!("forced release → command killed, distlock exec exited: {timings:?} ms");
}

/// A command that ignores SIGTERM gets SIGKILL once `--kill-after` has passed.
#[tokio::test]
async fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let ready = dir.path().join("ready");
    let script = script!(r#"trap '' TERM; echo ready > "$1"; until_exists "$1.never""#);
    let command = ["sh", "-c", script, "stubborn", path_str(&ready)];
    let run = exec(&redis, &["--kill-after", "1s", "stubborn"], &command);
    wait_for(&ready, "the command starts", |t| t.ends_with('\n')).await;
    let started = Instant::now();
    let release = finish(distlock_command(
        &redis,
        &["release", "--force", "stubborn"],
    ))
    .await;
    assert!(release.status.success(), "{release:?}");
    let out = finish(run).await;
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "SIGKILL came early"
    );
}

/// `distlock exec` killed with SIGKILL cannot release: the name is free again when its
/// lease (3 s) has run out, and another exec takes it. Control: while the first lives, its
/// watchdog renews the lease, and a wait longer than the lease finds the name busy.
#[tokio::test]
async fn sigkill_of_exec_frees_the_name_by_the_lease() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let started_file = dir.path().join("started");
    let stop = dir.path().join("stop");
    // Stopped by the killed exec's reaper (or when told, or after 10 s).
    let script = script!(r#"echo started > "$1"; until_exists "$2""#);
    let (started_path, stop_path) = (path_str(&started_file), path_str(&stop));
    let command = ["sh", "-c", script, "orphan", started_path, stop_path];
    let mut first = exec(&redis, &["--lease", "3s", "nightly"], &command);
    wait_for(&started_file, "the command starts", |t| t.ends_with('\n')).await;

    let out = exec_to_end(&redis, &["--wait", "4s", "nightly"], &["true"]).await;
    assert_eq!(
        out.status.code(),
        Some(75),
        "renewed past its lease: {out:?}"
    );

    let pid = Pid::from_raw(first.id().unwrap().try_into().unwrap());
    kill(pid, Signal::SIGKILL).unwrap();
    first.wait().await.unwrap();
    let killed = Instant::now();
    let out = exec_to_end(&redis, &["--wait", "8s", "nightly"], &["true"]).await;
    assert!(out.status.success(), "{out:?}");
    eprintln!(
        "SIGKILL of exec → the next exec ran: {:?}",
        killed.elapsed()
    );
    std::fs::write(&stop, "").unwrap();
}

/// A signal to `distlock exec` (SIGTERM, SIGINT) reaches the command, and the lock stays
/// held until the command has ended: the command traps it, says so, and exits 7 only when
/// told; `distlock exec` then exits 7 and the name is free.
#[tokio::test]
async fn signals_reach_the_command_and_the_lock_is_released_after_it() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        let dir = TempDir::new("distlock-exec").unwrap();
        let log = dir.path().join("log");
        let go = dir.path().join("go");
        // Named: a trap runs inside `until_exists`, where `$1` is that function's.
        let script = script!(
            r#"log=$1 go=$2
            trap 'echo got TERM >> "$log"; until_exists "$go"; exit 7' TERM
            trap 'echo got INT >> "$log"; until_exists "$go"; exit 7' INT
            echo ready >> "$log"; until_exists "$go""#
        );
        let command = ["sh", "-c", script, "trapper", path_str(&log), path_str(&go)];
        let run = exec(&redis, &["trapped"], &command);
        wait_for(&log, "the command starts", |t| t.contains("ready")).await;
        let pid = Pid::from_raw(run.id().unwrap().try_into().unwrap());
        kill(pid, signal).unwrap();
        let name = &signal.as_str()[3..];
        let got = format!("got {name}");
        wait_for(&log, "the command gets the signal", |t| t.contains(&got)).await;
        let state = locks.inspect("trapped").await.unwrap();
        assert!(state.is_held(), "held while the command runs on: {state:?}");
        std::fs::write(&go, "").unwrap();
        let out = finish(run).await;
        assert_eq!(out.status.code(), Some(7), "{out:?}");
        let state = locks.inspect("trapped").await.unwrap();
        assert!(!state.is_held(), "released after the command: {state:?}");
    }
}

/// A signal while `distlock exec` waits for the lock ends the wait, as it would end a
/// process that does not catch it (128 + its number), and the command never runs.
#[tokio::test]
async fn a_signal_while_waiting_ends_the_wait() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let dir = TempDir::new("distlock-exec").unwrap();
    let ran = dir.path().join("ran");
    let holder = locks.lock("busy").await.unwrap();
    let waiting = exec(&redis, &["busy"], &["touch", path_str(&ran)]);
    wait_for_lock(&locks, "busy", "the exec queues", |s| s.waiters() == 1).await;
    let pid = Pid::from_raw(waiting.id().unwrap().try_into().unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let out = finish(waiting).await;
    assert_eq!(out.status.code(), Some(128 + 2), "{out:?}");
    holder.release().await.unwrap();
    assert!(!ran.exists());
}

/// While `holder` (lease 30 s) holds `queued`, an exec waits for it and gets `signal`; it
/// must exit (128 + the signal) with its queue entry gone. Then `holder` is released and the
/// name taken again: the new holder, and the time from the release to it.
async fn interrupt_a_waiting_exec(
    redis: &RedisServer,
    locks: &LockClient,
    holder: LockGuard,
    signal: Signal,
) -> (LockGuard, Duration) {
    let waiting = exec(redis, &["--wait", "60s", "queued"], &["true"]);
    wait_for_lock(locks, "queued", "the exec queues", |s| s.waiters() == 1).await;
    let pid = Pid::from_raw(waiting.id().unwrap().try_into().unwrap());
    kill(pid, signal).unwrap();
    let out = finish(waiting).await;
    assert_eq!(out.status.code(), Some(128 + signal as i32), "{out:?}");
    let state = locks.inspect("queued").await.unwrap();
    assert_eq!(
        state.waiters(),
        0,
        "{signal}: left before exiting: {state:?}"
    );

    holder.release().await.unwrap();
    let released = Instant::now();
    let next = locks.lock("queued").lease(Duration::from_secs(30));
    let holder = next.wait(GENEROUS).acquire().await.unwrap();
    (holder, released.elapsed())
}

/// A signal while `distlock exec` waits leaves the lock's queue before `distlock exec`
/// exits (SIGINT, SIGTERM, SIGHUP, SIGQUIT: 128 + its number): once it has exited, the
/// lock has no waiter, and when the holder releases, the next acquisition gets the name
/// at once, not after the 30 s lease a hand-off to the dead exec would cost. Control: an
/// exec that exits without leaving (SIGKILL) is still queued after its end.
#[tokio::test]
async fn a_signal_while_waiting_leaves_the_queue_before_exiting() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let lease = Duration::from_secs(30);
    let mut holder = locks.lock("queued").lease(lease).acquire().await.unwrap();
    let mut timings = Vec::new();
    for signal in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        let elapsed;
        (holder, elapsed) = interrupt_a_waiting_exec(&redis, &locks, holder, signal).await;
        timings.push(elapsed.as_millis());
        assert!(elapsed < Duration::from_secs(3), "{signal}: {elapsed:?}");
    }
    eprintln!("signal while waiting → holder released → next acquisition: {timings:?} ms");

    let killed = exec(&redis, &["--wait", "60s", "queued"], &["true"]);
    wait_for_lock(&locks, "queued", "the exec queues", |s| s.waiters() == 1).await;
    let pid = Pid::from_raw(killed.id().unwrap().try_into().unwrap());
    kill(pid, Signal::SIGKILL).unwrap();
    finish(killed).await;
    let state = locks.inspect("queued").await.unwrap();
    assert_eq!(
        state.waiters(),
        1,
        "a SIGKILLed exec stays queued: {state:?}"
    );
    holder.release().await.unwrap();
}

/// A paused `distlock exec` (SIGSTOP) whose lease runs out loses the lock to another exec;
/// resumed, it stops its command at once and exits 124, while the other's command runs.
#[tokio::test]
async fn a_paused_exec_stops_its_command_when_resumed() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let log = dir.path().join("log");
    let marker = |id| ["sh", "-c", MARKER, "marker", path_str(&log), id];
    let first = exec(&redis, &["--lease", "1s", "paused"], &marker("a"));
    wait_for(&log, "the first command starts", |t| t.contains("start a")).await;
    let pid = Pid::from_raw(first.id().unwrap().try_into().unwrap());
    kill(pid, Signal::SIGSTOP).unwrap();
    let second = exec(&redis, &["--wait", "8s", "paused"], &marker("b"));
    wait_for(&log, "the lease runs out", |t| t.contains("start b")).await;
    kill(pid, Signal::SIGCONT).unwrap();
    let out = finish(first).await;
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("end a"),
        "stopped by SIGTERM, not ended: {text}"
    );
    std::fs::write(dir.path().join("go-b"), "").unwrap();
    assert!(finish(second).await.status.success());
}

/// `--hold-at-least` keeps the name after the command ended: a skipping exec finds it busy
/// until then. Control: without it, the name is free as soon as the command ended.
#[tokio::test]
async fn hold_at_least_keeps_the_name_after_the_command() {
    let redis = RedisServer::start();
    let skip = ["--skip-if-busy", "cron"];
    let started = Instant::now();
    let first = exec(&redis, &["--hold-at-least", "4s", "cron"], &["true"]);
    let locks = client(&redis);
    wait_for_lock(&locks, "cron", "the first exec holds", |s| s.is_held()).await;
    let out = exec_to_end(&redis, &skip, &["true"]).await;
    assert_eq!(
        out.status.code(),
        Some(75),
        "held after the command: {out:?}"
    );
    assert!(finish(first).await.status.success());
    assert!(started.elapsed() >= Duration::from_secs(4));
    assert!(exec_to_end(&redis, &skip, &["true"]).await.status.success());

    let out = exec_to_end(&redis, &["cron"], &["true"]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(exec_to_end(&redis, &skip, &["true"]).await.status.success());
}

/// Bad options are usage errors (2), an unreachable Redis is 125, and `--help` documents
/// the exit statuses with a crontab example: the command never runs.
#[tokio::test]
async fn usage_errors_and_failures_have_their_own_statuses() {
    let closed = ClosedPort::bind();
    let url = format!("redis://127.0.0.1:{}", closed.port());
    let run = |args: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_distlock"));
        command
            .env_remove("REDIS_URL")
            .args(["--url", &url, "exec"]);
        command.args(args).output().expect("distlock runs")
    };
    let ran = TempDir::new("distlock-exec").unwrap();
    let marker: PathBuf = ran.path().join("ran");
    let touch = ["--", "touch", path_str(&marker)];
    for usage in [
        &["name"][..],
        &["--skip-if-busy", "--wait", "1s", "name", "--", "true"],
        &["--read", "--write", "name", "--", "true"],
        &["--permits", "0", "name", "--", "true"],
        &["--wait", "soon", "name", "--", "true"],
        &["--replicas", "0", "name", "--", "true"],
        &["--replicas", "all", "name", "--", "true"],
        &["--replica-timeout", "soon", "name", "--", "true"],
    ] {
        let out = run(usage);
        assert_eq!(out.status.code(), Some(2), "{usage:?}: {out:?}");
    }
    let out = run(&[&["name"][..], &touch].concat());
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach Redis"), "{stderr}");
    assert!(!marker.exists());
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    for needle in [
        "Exit status:",
        "  124 ",
        "*/5 * * * * distlock",
        "DISTLOCK_FENCING_TOKEN",
        "leaves the lock's queue before it exits",
        "distlock exec-reaper",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

/// A process of the system, from `/proc/PID/stat`.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Process {
    pid: i32,
    ppid: i32,
    group: i32,
    zombie: bool,
}

/// Every process of the system (Linux): the fields after the command name, which may hold
/// spaces and parentheses, are read from its last `)` on.
#[cfg(target_os = "linux")]
fn processes() -> Vec<Process> {
    let entries = std::fs::read_dir("/proc").unwrap();
    let pids = entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok());
    let read = |pid: i32| -> Option<Process> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, fields) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = fields.split_whitespace().collect();
        Some(Process {
            pid,
            ppid: fields[1].parse().ok()?,
            group: fields[2].parse().ok()?,
            zombie: fields[0] == "Z" || fields[0] == "X",
        })
    };
    pids.filter_map(read).collect()
}

/// The live (not zombie) processes of the process group `group`.
#[cfg(target_os = "linux")]
fn live_members(group: i32) -> Vec<i32> {
    let members = processes()
        .into_iter()
        .filter(|p| p.group == group && !p.zombie);
    members.map(|p| p.pid).collect()
}

/// Starts an exec whose command is a shell with a background `sleep` and a foreground one
/// (three processes in the command's group): the exec and the group's id.
#[cfg(target_os = "linux")]
async fn exec_with_a_group(redis: &RedisServer, dir: &TempDir, name: &str) -> (Child, i32) {
    let pids = dir.path().join(name);
    let script = r#"echo $$ > "$1"; sleep 600 >/dev/null 2>&1 & echo $! >> "$1"; sleep 600 & wait"#;
    let command = ["sh", "-c", script, "group", path_str(&pids)];
    let run = exec(redis, &[name], &command);
    let text = wait_for(&pids, "the command starts", |t| t.lines().count() == 2).await;
    let group: i32 = text.lines().next().unwrap().parse().unwrap();
    let what = "the command's group has its three processes";
    let deadline = Instant::now() + GENEROUS;
    while live_members(group).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "{what}: {:?}",
            live_members(group)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (run, group)
}

/// Kills (SIGKILL) an exec whose command has a group of three processes: the time until
/// none of them is left (failing after 10 s).
#[cfg(target_os = "linux")]
async fn kill_an_exec(redis: &RedisServer, dir: &TempDir, name: &str) -> Duration {
    let (mut run, group) = exec_with_a_group(redis, dir, name).await;
    let pid = Pid::from_raw(run.id().unwrap().try_into().unwrap());
    kill(pid, Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    run.wait().await.unwrap();
    let deadline = killed + GENEROUS;
    while !live_members(group).is_empty() {
        let left = live_members(group);
        assert!(Instant::now() < deadline, "the group lives on: {left:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    killed.elapsed()
}

/// SIGKILL of `distlock exec` takes its command's whole process group with it (the shell
/// and its background child): its reaper sees it die and sends SIGTERM to the group. The
/// time until the group is gone is printed. Control: when the reaper is killed too, the
/// group runs on.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_killed_exec_takes_its_commands_group_with_it() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let mut timings = Vec::new();
    for trial in 0..3 {
        let elapsed = kill_an_exec(&redis, &dir, &format!("killed_{trial}")).await;
        timings.push(elapsed.as_millis());
    }
    eprintln!("SIGKILL of exec → its command's group gone: {timings:?} ms");

    let (mut run, group) = exec_with_a_group(&redis, &dir, "unreaped").await;
    let exec_pid = i32::try_from(run.id().unwrap()).unwrap();
    let reaper = processes().into_iter().find(|p| {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
        p.ppid == exec_pid && String::from_utf8_lossy(&cmdline).contains("exec-reaper")
    });
    let reaper = Pid::from_raw(reaper.expect("exec has a reaper").pid);
    kill(reaper, Signal::SIGKILL).unwrap();
    kill(Pid::from_raw(exec_pid), Signal::SIGKILL).unwrap();
    run.wait().await.unwrap();
    // The reaper acts within milliseconds (above); a second shows that nothing else does.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left = live_members(group);
    nix::sys::signal::killpg(Pid::from_raw(group), Signal::SIGKILL).unwrap();
    assert_eq!(
        left.len(),
        3,
        "without its reaper, the command outlives exec"
    );
}

/// A command's background processes that outlive it in its group are left alone when the
/// command ends normally (the reaper is dismissed first, not fired by exec's exit).
/// Control: [`a_killed_exec_takes_its_commands_group_with_it`], where the same processes go.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_normal_end_leaves_the_commands_background_processes_alone() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let pid_file = dir.path().join("pid");
    let script = r#"sleep 600 >/dev/null 2>&1 & echo $! > "$1""#;
    let command = ["sh", "-c", script, "background", path_str(&pid_file)];
    let out = exec_to_end(&redis, &["background"], &command).await;
    assert!(out.status.success(), "{out:?}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A reaper fired by exec's exit would have acted within milliseconds.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let alive = processes().iter().any(|p| p.pid == pid && !p.zombie);
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    assert!(alive, "the background sleep was killed");
}

/// p50 and max of `timings`, in ms, for the measurements below.
fn p50_max(mut timings: Vec<Duration>) -> (f64, f64) {
    timings.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(timings[timings.len() / 2]),
        ms(timings[timings.len() - 1]),
    )
}

/// Measurement for docs/lab-notes.md, run by hand: 30 execs interrupted (SIGINT) while
/// they wait; the time from the holder's release to the next acquisition.
#[tokio::test]
#[ignore = "measurement, run by hand (30 trials)"]
async fn measure_sigint_while_waiting() {
    let redis = RedisServer::start();
    let locks = client(&redis);
    let mut holder = locks.lock("queued").acquire().await.unwrap();
    let mut timings = Vec::new();
    for _ in 0..30 {
        let elapsed;
        (holder, elapsed) = interrupt_a_waiting_exec(&redis, &locks, holder, Signal::SIGINT).await;
        timings.push(elapsed);
    }
    let (p50, max) = p50_max(timings);
    eprintln!("SIGINT while waiting, release → next acquisition (ms): p50 {p50:.1}, max {max:.1}");
}

/// Measurement for docs/lab-notes.md, run by hand: 30 execs SIGKILLed while their
/// command (a group of three processes) runs; the time until the group is gone.
#[cfg(target_os = "linux")]
#[tokio::test]
#[ignore = "measurement, run by hand (30 trials)"]
async fn measure_sigkill_of_exec() {
    let redis = RedisServer::start();
    let dir = TempDir::new("distlock-exec").unwrap();
    let mut timings = Vec::new();
    for trial in 0..30 {
        let elapsed = kill_an_exec(&redis, &dir, &format!("killed_{trial}")).await;
        timings.push(elapsed);
    }
    let (p50, max) = p50_max(timings);
    eprintln!("SIGKILL of exec → command's group gone (ms): p50 {p50:.1}, max {max:.1}");
}
