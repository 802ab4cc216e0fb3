//! A lock holder in its own process, for the fault-injection suite (`tests/tests/faults/`
//! start it through `distlock_tests::fault::holder::HolderProcess`), so tests can SIGSTOP,
//! SIGCONT and SIGKILL it. It reports on stdout, one line per event, and reads commands on
//! stdin; it exits when stdin closes or its time bound passes.
//!
//! ```text
//! holder hold <lock url> <store url> <name> <lease ms>
//!     Takes the lock (watchdog-renewed, lease <lease ms>), reads the fenced store with its
//!     token and prints `ACQUIRED token=… value=… held=0|1` (is_held() when the acquisition
//!     returned). Then, on stdin:
//!     RESUMED   checks lost(), is_held(), writes the fenced store, releases, and prints
//!               `RESUMED lost_already=0|1 held=0|1 lost_fired=0|1 write=… release=…`.
//! holder soak <lock url> <store url> <name> <lease ms> <tasks> <secs> <seed>
//!     <tasks> tasks take the lock in a loop for <secs> s; each critical section reads and
//!     increments the fenced counter and two unfenced counters (`naive`: always writes;
//!     `checked`: writes only if is_held() just before), then prints
//!     `EXIT holder=<pid>/<task> token=… enter=<ns> exit=<ns> held=0|1 fenced=…`, then
//!     releases. Prints `DONE` at the end.
//! holder many <lock url> - <name prefix> <lease ms> <count> [read|write|sem:N]
//!     Takes <count> locks `<name prefix><i>` (watchdog-renewed, lease <lease ms>; with a
//!     mode, read locks, write locks or permits of N), prints `HELD count=<count>`, and
//!     holds them until stdin closes (or it is killed).
//! holder family <lock url> <detector url> <name> <lease ms> <rw|sem:N> <tasks> <count>
//!     Read-write locks (1 in 5 writes) or permits of N in a loop, checked by a detector on
//!     the second Redis (see holder/family.rs); prints `DONE entries=… violations=… …`.
//! holder guarded <lock url> <plain url> <name> <lease ms> guarded|plain
//!     Takes the lock, prints `READY token=… held=0|1`, and on `WRITE` decrements the stock
//!     key beside it without checking again, by a guarded write or a plain command (see
//!     holder/guarded.rs); prints `WROTE write=…`.
//! holder graceful <lock url> - <name> <lease ms>
//!     Takes the lock and a permit of `<name>_sem` (watchdog-renewed), prints `HELD`, and on
//!     SIGTERM shuts its client down as a service would (`LockClient::shutdown`), prints
//!     `SHUTDOWN released=<n> then=<error of a later lock>` and exits.
//! ```
//!
//! `<lock url>` is one server's URL, or a Cluster's or Sentinels' addresses as one word
//! (`distlock_tests::fault::lock_url`).

#[path = "holder/family.rs"]
mod family;
#[path = "holder/guarded.rs"]
mod guarded;

use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::lock_url;
use distlock_tests::fault::rng::Rng;
use distlock_tests::fault::store::{Counter, FencedStore};
use futures_util::FutureExt;
use lock_core::{LockClient, LockError, LockGuard};
use tokio::sync::mpsc;

/// No holder outlives this, whatever the parent does.
const LIFETIME: Duration = Duration::from_secs(600);

fn usage() -> ! {
    eprintln!(
        "usage: holder hold <lock url> <store url> <name> <lease ms>\n       \
         holder soak <lock url> <store url> <name> <lease ms> <tasks> <secs> <seed>\n       \
         holder many <lock url> - <name prefix> <lease ms> <count> [read|write|sem:N]\n       \
         holder family <lock url> <detector url> <name> <lease ms> <rw|sem:N> <tasks> <count>\n       \
         holder guarded <lock url> <plain url> <name> <lease ms> guarded|plain\n       \
         holder graceful <lock url> - <name> <lease ms>"
    );
    std::process::exit(2)
}

fn number(arg: Option<&String>) -> u64 {
    arg.and_then(|a| a.parse().ok()).unwrap_or_else(|| usage())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        usage();
    }
    let (lock_url, store_url, name) = (&args[1], &args[2], &args[3]);
    let lease = Duration::from_millis(number(args.get(4)));
    let work = async {
        match args[0].as_str() {
            "hold" => hold(lock_url, store_url, name, lease).await,
            "many" => many(lock_url, name, lease, number(args.get(5)), args.get(6)).await,
            "family" => family::run(&args, lease).await,
            "guarded" => guarded::run(&args, lease).await,
            "graceful" => graceful(lock_url, name, lease).await,
            "soak" => {
                let tasks = number(args.get(5));
                let secs = Duration::from_secs(number(args.get(6)));
                soak(
                    lock_url,
                    store_url,
                    name,
                    lease,
                    tasks,
                    secs,
                    number(args.get(7)),
                )
                .await;
            }
            _ => usage(),
        }
    };
    if tokio::time::timeout(LIFETIME, work).await.is_err() {
        eprintln!("holder: gave up after {LIFETIME:?}");
        std::process::exit(3);
    }
}

fn client(url: &str, lease: Duration) -> LockClient {
    lock_url::builder(url)
        .lease(lease)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("valid holder client")
}

fn flag(b: bool) -> u8 {
    u8::from(b)
}

fn release_outcome(result: Result<(), LockError>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(LockError::NotHeld { .. }) => "not_held",
        Err(e) if e.is_lost() => "lost",
        Err(_) => "error",
    }
}

/// Lines of stdin, read on a thread (the channel closes at end of input).
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

async fn many(lock_url: &str, prefix: &str, lease: Duration, count: u64, mode: Option<&String>) {
    let locks = client(lock_url, lease);
    let mut guards = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}{i}");
        let request = match mode.map(String::as_str) {
            Some("read") => locks.read_lock(name),
            Some("write") => locks.write_lock(name),
            Some(sem) => match sem.strip_prefix("sem:").and_then(|n| n.parse().ok()) {
                Some(permits) => locks.semaphore(name, permits),
                None => usage(),
            },
            None => locks.lock(name),
        };
        match request.wait(Duration::from_secs(20)).await {
            Ok(guard) => guards.push(guard),
            Err(e) => {
                println!("ERROR acquire: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("HELD count={count}");
    let mut stdin = stdin_lines();
    while stdin.recv().await.is_some() {}
    drop(guards);
}

async fn graceful(lock_url: &str, name: &str, lease: Duration) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let locks = client(lock_url, lease);
    let guard = locks.lock(name).await.expect("lock");
    let permit = locks
        .semaphore(format!("{name}_sem"), 2)
        .await
        .expect("permit");
    println!("HELD");
    terminate.recv().await;
    let released = locks.shutdown().await.expect("shutdown releases");
    let then = match locks.lock(name).await {
        Err(e) if e.is_shut_down() => "shut_down",
        Err(_) => "other_error",
        Ok(_) => "acquired",
    };
    println!("SHUTDOWN released={released} then={then}");
    drop((guard, permit));
}

async fn hold(lock_url: &str, store_url: &str, name: &str, lease: Duration) {
    let locks = client(lock_url, lease);
    let guard = match locks.lock(name).wait(Duration::from_secs(20)).await {
        Ok(guard) => guard,
        Err(e) => {
            println!("ERROR acquire: {e}");
            std::process::exit(1);
        }
    };
    let token = guard.fencing_token();
    let held = guard.is_held();
    let mut store = FencedStore::connect(store_url, name)
        .await
        .expect("store connects");
    let value = match store.read(token).await.expect("store answers") {
        Ok(value) => value,
        Err(stale) => {
            println!("ERROR fenced read refused: {stale:?}");
            std::process::exit(1);
        }
    };
    println!("ACQUIRED token={token} value={value} held={}", flag(held));
    let mut guard = Some(guard);
    let mut stdin = stdin_lines();
    while let Some(command) = stdin.recv().await {
        match (command.trim(), guard.take()) {
            ("RESUMED", Some(guard)) => resumed(guard, &mut store, token, value).await,
            (other, _) => println!("ERROR unknown or repeated command {other:?}"),
        }
    }
}

/// After a pause: what lost() and is_held() say, then the fenced write a holder paused
/// between its check and its write would make, then the release.
async fn resumed(guard: LockGuard, store: &mut FencedStore, token: u64, value: u64) {
    let lost_already = guard.lost().now_or_never().is_some();
    let held = guard.is_held();
    let lost_fired = tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .is_ok();
    let write = match store.write(token, value + 1).await {
        Ok(Ok(())) => "accepted".to_owned(),
        Ok(Err(stale)) => format!("rejected highest={}", stale.highest),
        Err(e) => format!("error:{e}").replace(' ', "_"),
    };
    let release = release_outcome(guard.release().await);
    println!(
        "RESUMED lost_already={} held={} lost_fired={} release={release} write={write}",
        flag(lost_already),
        flag(held),
        flag(lost_fired)
    );
}

async fn soak(
    lock_url: &str,
    store_url: &str,
    name: &str,
    lease: Duration,
    tasks: u64,
    secs: Duration,
    seed: u64,
) {
    let locks = client(lock_url, lease);
    let fenced = FencedStore::connect(store_url, name)
        .await
        .expect("store connects");
    let naive = Counter::connect(store_url, "naive")
        .await
        .expect("store connects");
    let checked = Counter::connect(store_url, "checked")
        .await
        .expect("store connects");
    let deadline = tokio::time::Instant::now() + secs;
    let pid = std::process::id();
    let mut running = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let (locks, name) = (locks.clone(), name.to_owned());
        let (mut fenced, mut naive, mut checked) = (fenced.clone(), naive.clone(), checked.clone());
        let mut rng = Rng::new(seed ^ (u64::from(pid) << 16) ^ task);
        running.spawn(async move {
            while tokio::time::Instant::now() < deadline {
                let wait = deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(Duration::from_secs(5));
                let guard = match locks.lock(name.as_str()).wait(wait).await {
                    Ok(guard) => guard,
                    Err(e) => {
                        println!(
                            "ACQ_ERR task={task} unavailable={}",
                            flag(e.is_unavailable())
                        );
                        if !e.is_wait_timeout() {
                            // Redis is restarting: back off instead of spinning.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        continue;
                    }
                };
                let token = guard.fencing_token();
                let enter = monotonic_ns();
                let Ok(read) = fenced.read(token).await else {
                    println!("STORE_ERR");
                    continue;
                };
                let (Ok(n), Ok(c)) = (naive.read().await, checked.read().await) else {
                    println!("STORE_ERR");
                    continue;
                };
                // The work between reading and writing the resource.
                tokio::time::sleep(rng.millis(Duration::ZERO, Duration::from_millis(5))).await;
                let fenced_outcome = match read {
                    Err(_) => "rejected_read",
                    Ok(v) => match fenced.write(token, v + 1).await {
                        Ok(Ok(())) => "accepted",
                        Ok(Err(_)) => "rejected_write",
                        Err(_) => "error",
                    },
                };
                let naive_ok = naive.write(n + 1).await.is_ok();
                let checked_ok = !guard.is_held() || checked.write(c + 1).await.is_ok();
                let exit = monotonic_ns();
                let held = guard.is_held();
                if !(naive_ok && checked_ok) {
                    println!("STORE_ERR");
                }
                println!(
                    "EXIT holder={pid}/{task} token={token} enter={enter} exit={exit} held={} \
                     fenced={fenced_outcome}",
                    flag(held)
                );
                let outcome = release_outcome(guard.release().await);
                if outcome != "ok" {
                    println!("RELEASE task={task} token={token} outcome={outcome}");
                }
            }
        });
    }
    while let Some(done) = running.join_next().await {
        done.expect("soak task");
    }
    println!("DONE");
}
