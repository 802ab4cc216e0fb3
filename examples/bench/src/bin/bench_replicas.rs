//! What waiting for a replica costs per acquisition (issue 43, item 6): a private master with
//! one replica on loopback, and a private server without one; uncontended acquire + release
//! cycles of one task, with `ReplicaAck::Off` and at default settings (`ReplicaAck::Auto`),
//! runs interleaved. Reports latency p50/p99 per cycle, Redis calls per cycle (`FCALL`,
//! `WAIT`) and the client's connections, and the same for a multi-lock of four names (one
//! call, then one `WAIT`) beside four single locks taken one after the other (what a
//! multi-lock cost before, when replicas were waited for).
//!
//! ```sh
//! cargo run --release -p distlock-bench --bin bench_replicas
//! cargo run --release -p distlock-bench --bin bench_replicas -- --quick
//! ```

// Shared with `bench`, which uses all of it.
#[allow(dead_code)]
#[path = "../server.rs"]
mod server;

use std::time::{Duration, Instant};

use distlock_examples::ExampleRedis;
use lock_core::{LockClient, ReplicaAck};
use server::Admin;

/// Names per multi-lock.
const NAMES: usize = 4;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (runs, cycles) = if quick { (1, 500) } else { (5, 4_000) };
    let master = ExampleRedis::start_private(&["--repl-diskless-sync-delay", "0"])?;
    let port = master
        .url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    let _replica = ExampleRedis::start_private(&["--replicaof", "127.0.0.1", &port])?;
    let lone = ExampleRedis::start_private(&[])?;
    wait_online(master.url()).await?;
    let admin = Admin::connect(master.url()).await?;

    let off = client(master.url(), Some(ReplicaAck::Off))?;
    let auto = client(master.url(), None)?;
    let alone = client(lone.url(), None)?;
    let lone_admin = Admin::connect(lone.url()).await?;
    for locks in [&off, &auto, &alone] {
        // Connections made, the library loaded, the replicas learned.
        locks.lock("warm").await?.release().await?;
        locks
            .lock_all(["warm_a", "warm_b"])
            .await?
            .release()
            .await?;
    }

    println!("# {runs} runs of {cycles} uncontended cycles, interleaved; medians of the runs");
    let mut table = Vec::new();
    for (what, shape) in [
        ("lock + release", Shape::One),
        ("lock_all(4) + release", Shape::All),
        ("4 × lock, then 4 × release", Shape::EachOfFour),
    ] {
        let mut rows: Vec<(&str, Vec<Cycle>)> = vec![
            ("off, 1 replica", Vec::new()),
            ("default, 1 replica", Vec::new()),
            ("default, no replica", Vec::new()),
        ];
        for _ in 0..runs {
            for (i, (locks, admin)) in [(&off, &admin), (&auto, &admin), (&alone, &lone_admin)]
                .into_iter()
                .enumerate()
            {
                rows[i].1.push(measure(locks, admin, shape, cycles).await?);
            }
        }
        for (label, measured) in rows {
            table.push((what, label, median(&measured)));
        }
    }
    println!("| cycle | client | p50 µs | p99 µs | FCALL/cycle | WAIT/cycle |");
    println!("|---|---|---|---|---|---|");
    for (what, label, c) in &table {
        println!(
            "| {what} | {label} | {:.0} | {:.0} | {:.2} | {:.2} |",
            c.p50_us, c.p99_us, c.fcalls, c.waits
        );
    }
    let connections = [
        (
            "off, 1 replica",
            connections_of(&admin, master.url(), Some(ReplicaAck::Off)).await?,
        ),
        (
            "default, 1 replica",
            connections_of(&admin, master.url(), None).await?,
        ),
        (
            "default, no replica",
            connections_of(&lone_admin, lone.url(), None).await?,
        ),
    ];
    println!("connections of one client after one cycle: {connections:?}");
    for what in [
        "lock + release",
        "lock_all(4) + release",
        "4 × lock, then 4 × release",
    ] {
        let row = |label: &str| {
            table
                .iter()
                .find(|(w, l, _)| *w == what && *l == label)
                .map(|(_, _, c)| *c)
                .expect("measured")
        };
        let (off, auto, alone) = (
            row("off, 1 replica"),
            row("default, 1 replica"),
            row("default, no replica"),
        );
        println!(
            "{what}: default/off with a replica p50 ×{:.2}, p99 ×{:.2}; without a replica \
             default/off-with-replica p50 ×{:.2}",
            auto.p50_us / off.p50_us,
            auto.p99_us / off.p99_us,
            alone.p50_us / off.p50_us,
        );
    }
    Ok(())
}

fn client(url: &str, ack: Option<ReplicaAck>) -> Result<LockClient, lock_core::LockError> {
    let builder = LockClient::builder(url).command_timeout(Duration::from_secs(5));
    match ack {
        Some(ack) => builder.replica_ack(ack),
        None => builder,
    }
    .build()
}

/// Waits until the master has its replica online (`WAIT 0 0` on a new connection).
async fn wait_online(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut conn = client.get_multiplexed_async_connection().await?;
        let online: u64 = redis::cmd("WAIT")
            .arg(0)
            .arg(0)
            .query_async(&mut conn)
            .await?;
        if online == 1 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the replica never came online".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Clone, Copy)]
enum Shape {
    One,
    All,
    EachOfFour,
}

/// One run's figures.
#[derive(Clone, Copy, Debug)]
struct Cycle {
    p50_us: f64,
    p99_us: f64,
    fcalls: f64,
    waits: f64,
}

async fn measure(
    locks: &LockClient,
    admin: &Admin,
    shape: Shape,
    cycles: usize,
) -> Result<Cycle, Box<dyn std::error::Error>> {
    let names: Vec<String> = (0..NAMES).map(|i| format!("{{bench}}:n{i}")).collect();
    admin.reset_stats().await;
    let mut took = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let started = Instant::now();
        match shape {
            Shape::One => locks.lock("bench").await?.release().await?,
            Shape::All => locks.lock_all(names.clone()).await?.release().await?,
            Shape::EachOfFour => {
                let mut guards = Vec::with_capacity(NAMES);
                for name in &names {
                    guards.push(locks.lock(name.as_str()).await?);
                }
                for guard in guards.into_iter().rev() {
                    guard.release().await?;
                }
            }
        }
        took.push(started.elapsed());
    }
    let stats = admin.commandstats().await;
    let calls = |name: &str| stats.0.get(name).map_or(0, |(calls, _)| *calls) as f64;
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    Ok(Cycle {
        p50_us: at(0.50),
        p99_us: at(0.99),
        fcalls: calls("fcall") / cycles as f64,
        waits: calls("wait") / cycles as f64,
    })
}

/// The connections a new client with `ack` holds open on the server of `admin` after one
/// cycle (the question about replicas, on a connection of its own, is closed by then).
async fn connections_of(
    admin: &Admin,
    url: &str,
    ack: Option<ReplicaAck>,
) -> Result<u64, Box<dyn std::error::Error>> {
    let before = connected_clients(admin).await;
    let locks = client(url, ack)?;
    locks.lock("connections").await?.release().await?;
    // The question's connection closes as its client drops it: let the server see it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let opened = connected_clients(admin).await - before;
    // Closed before the next client is counted.
    drop(locks);
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(opened)
}

/// The server's client connections (replicas' links are not counted).
async fn connected_clients(admin: &Admin) -> u64 {
    let info = admin.info("clients").await;
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The run with the median p50, with the median of each other figure.
fn median(runs: &[Cycle]) -> Cycle {
    let mid = |f: fn(&Cycle) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Cycle {
        p50_us: mid(|c| c.p50_us),
        p99_us: mid(|c| c.p99_us),
        fcalls: mid(|c| c.fcalls),
        waits: mid(|c| c.waits),
    }
}
