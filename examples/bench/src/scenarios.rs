//! Scenarios A (uncontended), B (parallel) and C (contention on one name).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::peers::{Lib, Peer};
use crate::server::Admin;

/// One run's numbers, by metric name, in display order.
pub type Metrics = Vec<(&'static str, f64)>;

/// Scenario sizes (the values unless `--quick` or flags change them).
#[derive(Clone, Debug)]
pub struct Sizes {
    pub a_iters: usize,
    pub b_tasks: usize,
    pub b_secs: f64,
    pub c_tasks: usize,
    pub c_secs: f64,
    pub d_locks: usize,
    pub d_secs: f64,
    pub d_lease: Duration,
    pub e_secs: f64,
    pub e_conns: usize,
}

/// The `q`-quantile of sorted samples (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A: one task, sequential acquire+release on distinct names.
pub async fn uncontended(lib: Lib, peer: &Peer, admin: &Admin, s: &Sizes, run: usize) -> Metrics {
    admin.reset().await;
    for i in 0..200 {
        let held = peer.lock(&format!("warm{run}:{i}")).await.expect("lock");
        peer.unlock(held).await.expect("unlock");
    }
    admin.reset_stats().await;
    let keys_before = admin.dbsize().await;
    let mut lat = Vec::with_capacity(s.a_iters);
    for i in 0..s.a_iters {
        let name = format!("a{run}:{i}");
        let t = Instant::now();
        let held = peer.lock(&name).await.expect("lock");
        peer.unlock(held).await.expect("unlock");
        lat.push(micros(t.elapsed()));
    }
    let stats = admin.commandstats().await;
    // Right after the last release: what the names left behind, beyond their locks' lifetime
    // for libraries whose keys have no TTL.
    let keys_left = admin.dbsize().await.saturating_sub(keys_before);
    if std::env::var_os("BENCH_VERBOSE").is_some() {
        eprintln!("A {} commandstats (calls, usec): {:?}", lib.name(), stats.0);
    }
    lat.sort_by(f64::total_cmp);
    let n = s.a_iters as f64;
    vec![
        ("p50 µs", quantile(&lat, 0.5)),
        ("p99 µs", quantile(&lat, 0.99)),
        ("sent cmds/cycle", stats.sent(lib.sends_set()) as f64 / n),
        ("all cmds/cycle", stats.total() as f64 / n),
        ("Redis µs/cycle", stats.usec(lib.sends_set()) as f64 / n),
        ("keys left/10k names", keys_left as f64 / n * 10_000.0),
    ]
}

/// B: `b_tasks` tasks, each on its own name, for `b_secs`.
pub async fn parallel(lib: Lib, peer: &Peer, admin: &Admin, s: &Sizes, run: usize) -> Metrics {
    admin.reset().await;
    admin.reset_stats().await;
    let cycles = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(s.b_secs);
    let tasks: Vec<_> = (0..s.b_tasks)
        .map(|t| {
            let (peer, cycles) = (peer.clone(), Arc::clone(&cycles));
            tokio::spawn(async move {
                let name = format!("b{run}:{t}");
                while Instant::now() < end {
                    let held = peer.lock(&name).await.expect("lock");
                    peer.unlock(held).await.expect("unlock");
                    cycles.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = admin.commandstats().await;
    let n = cycles.load(Ordering::Relaxed) as f64;
    vec![
        ("cycles/s", n / secs),
        ("sent cmds/cycle", stats.sent(lib.sends_set()) as f64 / n),
        ("Redis µs/cycle", stats.usec(lib.sends_set()) as f64 / n),
    ]
}

/// Shared state of scenario C.
#[derive(Default)]
struct Contention {
    last: AtomicUsize,
    acquisitions: AtomicU64,
    handoffs: AtomicU64,
    errors: AtomicU64,
    in_window: AtomicBool,
    per_task: Vec<AtomicU64>,
}

/// C: `c_tasks` tasks on one name, each holding for one yield.
pub async fn contention(lib: Lib, peer: &Peer, admin: &Admin, s: &Sizes, run: usize) -> Metrics {
    admin.reset().await;
    admin.reset_stats().await;
    let shared = Arc::new(Contention {
        last: AtomicUsize::new(usize::MAX),
        in_window: AtomicBool::new(true),
        per_task: (0..s.c_tasks).map(|_| AtomicU64::new(0)).collect(),
        ..Contention::default()
    });
    let waits = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(s.c_secs);
    let name = Arc::new(format!("c{run}"));
    let tasks: Vec<_> = (0..s.c_tasks)
        .map(|me| {
            let (peer, shared, waits, name) = (
                peer.clone(),
                Arc::clone(&shared),
                Arc::clone(&waits),
                Arc::clone(&name),
            );
            tokio::spawn(async move {
                while Instant::now() < end {
                    let t = Instant::now();
                    let held = match peer.lock(&name).await {
                        Ok(held) => held,
                        Err(_) => {
                            shared.errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    if shared.in_window.load(Ordering::Acquire) {
                        let waited = micros(t.elapsed());
                        waits.lock().unwrap().push(waited);
                        shared.per_task[me].fetch_add(1, Ordering::Relaxed);
                        shared.acquisitions.fetch_add(1, Ordering::Relaxed);
                        let prev = shared.last.swap(me, Ordering::Relaxed);
                        if prev != me && prev != usize::MAX {
                            shared.handoffs.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::task::yield_now().await;
                    let _ = peer.unlock(held).await;
                }
            })
        })
        .collect();
    tokio::time::sleep_until(end.into()).await;
    shared.in_window.store(false, Ordering::Release);
    let stats = admin.commandstats().await;
    let secs = started.elapsed().as_secs_f64();
    let acquisitions = shared.acquisitions.load(Ordering::Relaxed) as f64;
    let handoffs = shared.handoffs.load(Ordering::Relaxed) as f64;
    // Waiters still in line finish their turn; a library that never serves them is cut off.
    let mut cut_off = 0.0;
    for task in tasks {
        let abort = task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .is_err()
        {
            abort.abort();
            cut_off += 1.0;
        }
    }
    let mut per_task: Vec<f64> = shared
        .per_task
        .iter()
        .map(|n| n.load(Ordering::Relaxed) as f64)
        .collect();
    let mut waits = std::mem::take(&mut *waits.lock().unwrap());
    waits.sort_by(f64::total_cmp);
    per_task.sort_by(f64::total_cmp);
    let mean = acquisitions / s.c_tasks as f64;
    let least = per_task[0];
    vec![
        ("acq/s", acquisitions / secs),
        ("hand-offs/s", handoffs / secs),
        ("wait p50 µs", quantile(&waits, 0.5)),
        ("wait p99 µs", quantile(&waits, 0.99)),
        ("least/task", least),
        ("most/task", per_task.last().copied().unwrap_or(0.0)),
        ("least/mean", least / mean),
        (
            "sent cmds/acq",
            stats.sent(lib.sends_set()) as f64 / acquisitions,
        ),
        ("all cmds/acq", stats.total() as f64 / acquisitions),
        (
            "Redis µs/acq",
            stats.usec(lib.sends_set()) as f64 / acquisitions,
        ),
        ("errors", shared.errors.load(Ordering::Relaxed) as f64),
        ("cut off", cut_off),
    ]
}
