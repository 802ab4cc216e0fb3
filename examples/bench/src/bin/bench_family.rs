//! The lock family beside the exclusive lock, in one process run against one private Redis:
//! each primitive and the exclusive-lock way of doing the same job run interleaved, several
//! times, and are reported as medians and ratios. See BENCHMARKS.md ("The lock family").
//!
//! - F: a read-mostly workload (90 % reads, 1 ms of work per hold, 16 tasks): the read-write
//!   lock against the exclusive lock — operations per second.
//! - G: permits handed on under contention (16 tasks, no work): a semaphore of 4 permits
//!   and of 1 permit against the exclusive lock — acquisitions per second.
//! - H: two names, uncontended: `lock_all([a, b])` against two single locks taken one after
//!   the other — µs per acquire + release, Redis calls and Redis µs per cycle.
//!
//! ```sh
//! cargo run --release -p distlock-bench --bin bench_family
//! cargo run --release -p distlock-bench --bin bench_family -- --quick
//! ```

// Shared with `bench`, which uses all of it.
#[allow(dead_code)]
#[path = "../server.rs"]
mod server;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::LockClient;
use server::{Admin, Server};

/// Sizes of one run.
#[derive(Clone, Copy)]
struct Sizes {
    runs: usize,
    secs: f64,
    tasks: usize,
    h_iters: usize,
}

/// What one F or G run measured: operations per second, and what Redis did per operation.
#[derive(Clone, Copy, Default)]
struct Rate {
    per_sec: f64,
    reads_per_sec: f64,
    redis_us_per_op: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Rw {
    Exclusive,
    ReadWrite,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = if quick {
        Sizes {
            runs: 1,
            secs: 1.0,
            tasks: 16,
            h_iters: 500,
        }
    } else {
        Sizes {
            runs: 3,
            secs: 5.0,
            tasks: 16,
            h_iters: 5_000,
        }
    };
    let server = Server::start()?;
    let admin = Admin::connect(&server.url).await?;
    println!(
        "Redis {} on loopback, {} run(s) each, interleaved; medians",
        admin.version().await,
        sizes.runs
    );
    let client = LockClient::builder(&server.url)
        .command_timeout(Duration::from_secs(10))
        .build()?;

    let (mut exclusive, mut rw) = (Vec::new(), Vec::new());
    let (mut lock1, mut sem1, mut sem4) = (Vec::new(), Vec::new(), Vec::new());
    let (mut multi, mut singles) = (Vec::new(), Vec::new());
    for _ in 0..sizes.runs {
        exclusive.push(read_mostly(&client, &admin, sizes, Rw::Exclusive).await);
        rw.push(read_mostly(&client, &admin, sizes, Rw::ReadWrite).await);
        lock1.push(hand_offs(&client, &admin, sizes, None).await);
        sem1.push(hand_offs(&client, &admin, sizes, Some(1)).await);
        sem4.push(hand_offs(&client, &admin, sizes, Some(4)).await);
        multi.push(two_names(&client, &admin, sizes, true).await);
        singles.push(two_names(&client, &admin, sizes, false).await);
    }
    let keys_left = admin.dbsize().await;

    let (ex, rw) = (median_rate(&exclusive), median_rate(&rw));
    println!(
        "\n### F: 90 % reads, 1 ms per hold, {} tasks, {} s",
        sizes.tasks, sizes.secs
    );
    println!("| lock | ops/s | reads/s | Redis µs per op |\n| --- | ---: | ---: | ---: |");
    for (label, r) in [("exclusive lock", ex), ("read-write lock", rw)] {
        println!(
            "| {label} | {:.0} | {:.0} | {:.1} |",
            r.per_sec, r.reads_per_sec, r.redis_us_per_op
        );
    }
    println!(
        "read-write / exclusive: ×{:.2} ops/s",
        rw.per_sec / ex.per_sec
    );

    let (l1, s1, s4) = (median_rate(&lock1), median_rate(&sem1), median_rate(&sem4));
    println!(
        "\n### G: acquisitions under contention, {} tasks, no work, {} s",
        sizes.tasks, sizes.secs
    );
    println!("| primitive | acquisitions/s | Redis µs per acquisition |\n| --- | ---: | ---: |");
    for (label, r) in [
        ("exclusive lock", l1),
        ("semaphore, 1 permit", s1),
        ("semaphore, 4 permits", s4),
    ] {
        println!("| {label} | {:.0} | {:.1} |", r.per_sec, r.redis_us_per_op);
    }
    println!(
        "semaphore(1) / lock: ×{:.2}; semaphore(4) / lock: ×{:.2}",
        s1.per_sec / l1.per_sec,
        s4.per_sec / l1.per_sec
    );

    let (m, s) = (median_cycle(&multi), median_cycle(&singles));
    println!("\n### H: two names, uncontended, {} cycles", sizes.h_iters);
    println!("| way | µs per cycle | calls per cycle | Redis µs per cycle |\n| --- | ---: | ---: | ---: |");
    for (label, c) in [("lock_all([a, b])", m), ("lock(a), then lock(b)", s)] {
        println!("| {label} | {:.1} | {:.1} | {:.1} |", c.0, c.1, c.2);
    }
    println!(
        "lock_all / two single locks: ×{:.2} µs per cycle",
        m.0 / s.0
    );
    println!("\nkeys left in Redis after every run: {keys_left}");
    Ok(())
}

/// F: `tasks` tasks for `secs`, each op a read (9 in 10) or a write, holding for 1 ms.
async fn read_mostly(client: &LockClient, admin: &Admin, s: Sizes, rw: Rw) -> Rate {
    admin.reset().await;
    let (ops, reads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let until = Instant::now() + Duration::from_secs_f64(s.secs);
    let mut tasks = Vec::new();
    for t in 0..s.tasks {
        let (client, ops, reads) = (client.clone(), ops.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while Instant::now() < until {
                let read = i % 10 != 0;
                i += 1;
                let request = match (rw, read) {
                    (Rw::Exclusive, _) => client.lock("catalog"),
                    (Rw::ReadWrite, true) => client.read_lock("catalog"),
                    (Rw::ReadWrite, false) => client.write_lock("catalog"),
                };
                let guard = request
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("acquire");
                tokio::time::sleep(Duration::from_millis(1)).await;
                guard.release().await.expect("release");
                ops.fetch_add(1, Ordering::Relaxed);
                if read {
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    rate(
        admin,
        s.secs,
        ops.load(Ordering::Relaxed),
        reads.load(Ordering::Relaxed),
    )
    .await
}

/// G: `tasks` tasks for `secs` taking and giving back one permit (or the lock) with no work.
async fn hand_offs(client: &LockClient, admin: &Admin, s: Sizes, permits: Option<u32>) -> Rate {
    admin.reset().await;
    let ops = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs_f64(s.secs);
    let mut tasks = Vec::new();
    for _ in 0..s.tasks {
        let (client, ops) = (client.clone(), ops.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let request = match permits {
                    Some(n) => client.semaphore("exports", n),
                    None => client.lock("exports"),
                };
                let guard = request
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("acquire");
                guard.release().await.expect("release");
                ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    rate(admin, s.secs, ops.load(Ordering::Relaxed), 0).await
}

async fn rate(admin: &Admin, secs: f64, ops: u64, reads: u64) -> Rate {
    let stats = admin.commandstats().await;
    let ops_f = ops.max(1) as f64;
    Rate {
        per_sec: ops as f64 / secs,
        reads_per_sec: reads as f64 / secs,
        redis_us_per_op: stats.usec(false) as f64 / ops_f,
    }
}

/// H: µs per cycle, Redis calls (inner ones included) and Redis µs per cycle.
async fn two_names(client: &LockClient, admin: &Admin, s: Sizes, multi: bool) -> (f64, f64, f64) {
    admin.reset().await;
    let started = Instant::now();
    for _ in 0..s.h_iters {
        if multi {
            let both = client.lock_all(["acct_a", "acct_b"]).await.expect("both");
            both.release().await.expect("release");
        } else {
            let a = client.lock("acct_a").await.expect("a");
            let b = client.lock("acct_b").await.expect("b");
            b.release().await.expect("release b");
            a.release().await.expect("release a");
        }
    }
    let elapsed = started.elapsed();
    let stats = admin.commandstats().await;
    let n = s.h_iters as f64;
    (
        elapsed.as_secs_f64() * 1e6 / n,
        stats.total() as f64 / n,
        stats.usec(false) as f64 / n,
    )
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn median_rate(rates: &[Rate]) -> Rate {
    Rate {
        per_sec: median(rates.iter().map(|r| r.per_sec).collect()),
        reads_per_sec: median(rates.iter().map(|r| r.reads_per_sec).collect()),
        redis_us_per_op: median(rates.iter().map(|r| r.redis_us_per_op).collect()),
    }
}

fn median_cycle(cycles: &[(f64, f64, f64)]) -> (f64, f64, f64) {
    (
        median(cycles.iter().map(|c| c.0).collect()),
        median(cycles.iter().map(|c| c.1).collect()),
        median(cycles.iter().map(|c| c.2).collect()),
    )
}
