//! Fault suite, soak: 8 holder processes × 4 tasks on one lock name while random faults hit
//! them (SIGSTOP for up to 2 leases, SIGKILL and restart of a holder process, crash and
//! restart of Redis with `appendfsync always`). Bounded: 30 s by default,
//! `DISTLOCK_SOAK_SECS` to lengthen it; `DISTLOCK_SOAK_SEED` replays a fault schedule;
//! `DISTLOCK_SOAK_LOG=<file>` keeps the faults and every line the holders printed.

use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::fault::overlap::{check, Section};
use distlock_tests::fault::rng::Rng;
use distlock_tests::fault::store::{Counter, FencedStore};
use distlock_tests::RedisServer;
use tokio::task::block_in_place;
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
const PROCESSES: usize = 8;
const TASKS: u64 = 4;
const LEASE: Duration = Duration::from_secs(1);
const DEFAULT_SECS: u64 = 30;
const NAME: &str = "soak";

fn soak_secs() -> u64 {
    std::env::var("DISTLOCK_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS)
}

struct Holders {
    lock_url: String,
    store_url: String,
    seed: u64,
    running: Vec<HolderProcess>,
    /// Lines of holders that were killed (their open sections never report an exit).
    finished: Vec<String>,
}

impl Holders {
    fn spawn(&self, until: Instant) -> HolderProcess {
        let secs = until
            .saturating_duration_since(Instant::now())
            .as_secs()
            .max(1);
        let args = [
            "soak".to_owned(),
            self.lock_url.clone(),
            self.store_url.clone(),
            NAME.to_owned(),
            LEASE.as_millis().to_string(),
            TASKS.to_string(),
            secs.to_string(),
            self.seed.to_string(),
        ];
        HolderProcess::spawn(HOLDER, &args)
    }
}

/// 0 overlaps among critical sections whose holder still held the lock when it left, tokens
/// growing in the order of the sections, and a fenced counter with 0 accepted stale writes
/// and 0 lost updates. The unfenced counters' lost updates are reported (the gap fencing
/// closes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a 30 s soak: .ci/run runs it with `--ignored`"]
async fn soak_with_random_pauses_kills_and_redis_restarts() {
    let secs = soak_secs();
    let seed = Rng::seed_from_env("DISTLOCK_SOAK_SEED");
    println!("faults::soak: {secs} s, seed {seed} (DISTLOCK_SOAK_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    // Redis keeps the locks and the fence counter across its crash: every write is fsynced.
    let mut server = RedisServer::builder()
        .args(["--appendonly", "yes", "--appendfsync", "always"])
        .start();
    let store = RedisServer::start();
    let until = Instant::now() + Duration::from_secs(secs);
    let mut holders = Holders {
        lock_url: server.url(),
        store_url: store.url(),
        seed,
        running: Vec::new(),
        finished: Vec::new(),
    };
    for _ in 0..PROCESSES {
        let holder = holders.spawn(until);
        holders.running.push(holder);
    }

    let mut faults: Vec<String> = Vec::new();
    // The last fault ends a lease before the holders stop, so its effects are checked too.
    while Instant::now() + LEASE * 3 < until {
        tokio::time::sleep(rng.millis(Duration::from_millis(200), Duration::from_millis(600)))
            .await;
        let at_ms = (monotonic_ns() / 1_000_000) % 1_000_000;
        match rng.below(0..10) {
            0..6 => {
                let p = rng.index(holders.running.len());
                let pause = rng.millis(LEASE * 3 / 10, LEASE * 2);
                let holder = &holders.running[p];
                faults.push(format!("{at_ms}: SIGSTOP {} for {pause:?}", holder.pid()));
                holder.stop();
                tokio::time::sleep(pause).await;
                holder.cont();
            }
            6..8 => {
                let p = rng.index(holders.running.len());
                let mut killed = holders.running.swap_remove(p);
                faults.push(format!("{at_ms}: SIGKILL {} and restart it", killed.pid()));
                killed.kill().await;
                let lines = killed.into_lines(Duration::from_secs(5)).await;
                holders.finished.extend(lines);
                let holder = holders.spawn(until);
                holders.running.push(holder);
            }
            _ => {
                faults.push(format!("{at_ms}: Redis crash and restart"));
                block_in_place(|| server.restart());
            }
        }
    }

    let mut lines = holders.finished;
    for holder in holders.running {
        let (status, rest) = holder.finish(Duration::from_secs(secs + 30)).await;
        assert!(status.success(), "a holder failed ({status}); seed {seed}");
        lines.extend(rest);
    }
    if let Ok(path) = std::env::var("DISTLOCK_SOAK_LOG") {
        let all = [faults.clone(), lines.clone()].concat().join("\n");
        std::fs::write(&path, all).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    let sections: Vec<Section> = lines
        .iter()
        .filter(|l| l.starts_with("EXIT "))
        .map(|l| Section::from_line(l).unwrap_or_else(|| panic!("bad line {l:?}")))
        .collect();
    let count = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    let rejected = lines
        .iter()
        .filter(|l| l.contains("fenced=rejected"))
        .count();
    let verdict = check(&sections);
    let fenced = FencedStore::connect(&store.url(), NAME)
        .await
        .unwrap()
        .stats()
        .await
        .unwrap();
    let (naive_writes, naive_value) = Counter::connect(&store.url(), "naive")
        .await
        .unwrap()
        .totals()
        .await
        .unwrap();
    let (checked_writes, checked_value) = Counter::connect(&store.url(), "checked")
        .await
        .unwrap()
        .totals()
        .await
        .unwrap();
    let report = format!(
        "faults::soak: {secs} s, seed {seed}, {} faults ({} pauses, {} holder kills, {} Redis \
         restarts)\n  critical sections: {verdict}\n  fenced store: {} writes accepted, {} \
         rejected ({} reads, {} writes refused), stale accepted {}, lost updates {}\n  \
         unfenced counter, always writes: {} lost updates of {naive_writes}\n  unfenced \
         counter, writes if is_held(): {} lost updates of {checked_writes}\n  acquisition \
         errors {}, releases not ok {}",
        faults.len(),
        faults.iter().filter(|f| f.contains("SIGSTOP")).count(),
        faults.iter().filter(|f| f.contains("SIGKILL")).count(),
        faults.iter().filter(|f| f.contains("Redis")).count(),
        fenced.write_log.len(),
        rejected,
        fenced.rejected_reads,
        fenced.rejected_writes,
        fenced.stale_accepted(),
        fenced.lost_updates(),
        naive_writes.saturating_sub(naive_value),
        checked_writes.saturating_sub(checked_value),
        count("ACQ_ERR"),
        count("RELEASE"),
    );
    println!("{report}");
    let replay = format!("seed {seed}; faults:\n{}", faults.join("\n"));
    assert!(verdict.is_clean(), "{report}\n{replay}");
    assert_eq!(fenced.stale_accepted(), 0, "{report}\n{replay}");
    assert_eq!(fenced.lost_updates(), 0, "{report}\n{replay}");
    // A killed or frozen waiter at the head of the fair queue is handed the lock and keeps it
    // for a lease: faults cost throughput, so only ask for steady progress.
    assert!(
        verdict.checked >= 2 * secs as usize,
        "too little progress: {report}\n{replay}"
    );
}
