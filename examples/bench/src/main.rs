//! distlock beside its peers, in one process run: the same scenarios against the same
//! private Redis, libraries interleaved, medians of several runs and the ratio to a
//! hand-written baseline. See BENCHMARKS.md for the scenarios and the latest results.
//!
//! ```sh
//! cargo run --release -p distlock-bench --bin bench            # full (~7 min)
//! cargo run --release -p distlock-bench --bin bench -- --quick # smoke test
//! cargo run --release -p distlock-bench --bin bench -- --scenarios A,C --libs baseline,distlock
//! ```

mod layer;
mod peers;
mod report;
mod scenarios;
mod server;
mod watchdog;

use std::time::{Duration, Instant};

use peers::{Lib, Peer};
use report::Results;
use scenarios::Sizes;
use server::{Admin, Server};

const USAGE: &str = "usage: bench [--quick] [--runs N] [--d-runs N] [--scenarios A,B,C,D,E]
             [--libs baseline,rslock,redis-lock,distlock,redisson-lua] [--a-iters N] [--b-secs S]
             [--c-secs S] [--d-locks N] [--d-secs S] [--d-lease-ms MS] [--e-secs S]
  REDIS_URL (loopback only) replaces the private redis-server the bench starts.";

struct Args {
    runs: usize,
    d_runs: usize,
    scenarios: String,
    libs: Vec<Lib>,
    sizes: Sizes,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        runs: 3,
        d_runs: 1,
        scenarios: "ABCDE".to_owned(),
        libs: Lib::ALL.to_vec(),
        sizes: Sizes {
            a_iters: 20_000,
            b_tasks: 64,
            b_secs: 10.0,
            c_tasks: 16,
            c_secs: 5.0,
            d_locks: 10_000,
            d_secs: 30.0,
            d_lease: Duration::from_secs(3),
            e_secs: 5.0,
            e_conns: 32,
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--quick" {
            let s = &mut args.sizes;
            (s.a_iters, s.b_secs, s.c_secs, s.d_locks, s.d_secs, s.e_secs) =
                (2_000, 2.0, 2.0, 2_000, 4.0, 2.0);
            args.runs = 1;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = || {
            value
                .parse::<f64>()
                .map_err(|_| format!("{flag}: not a number"))
        };
        let s = &mut args.sizes;
        match flag.as_str() {
            "--runs" => args.runs = num()?.max(1.0) as usize,
            "--d-runs" => args.d_runs = num()?.max(1.0) as usize,
            "--scenarios" => args.scenarios = value.to_uppercase(),
            "--libs" => {
                args.libs = value
                    .split(',')
                    .map(|n| {
                        Lib::ALL
                            .into_iter()
                            .find(|l| l.name() == n.trim())
                            .ok_or_else(|| format!("unknown library {n}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--a-iters" => s.a_iters = num()? as usize,
            "--b-secs" => s.b_secs = num()?,
            "--c-secs" => s.c_secs = num()?,
            "--d-locks" => s.d_locks = num()? as usize,
            "--d-secs" => s.d_secs = num()?,
            "--d-lease-ms" => s.d_lease = Duration::from_millis(num()? as u64),
            "--e-secs" => s.e_secs = num()?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn machine(redis_version: &str) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "?".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}, redis-server {redis_version}, loopback")
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let server = match Server::start() {
        Ok(server) => server,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(args, &server));
    // Client tasks still parked on Redis end with the runtime, before the server goes.
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(server);
}

async fn run(args: Args, server: &Server) {
    let url = server.url.clone();
    let admin = Admin::connect(&url).await.expect("admin connection");
    let version = admin.version().await;
    let started = Instant::now();
    eprintln!(
        "redis {version} at {url} (pid {:?}); {} run(s); {}",
        server.pid(),
        args.runs,
        machine(&version)
    );
    let mut peers = Vec::new();
    for &lib in &args.libs {
        peers.push((lib, Peer::new(lib, &url).await.expect("peer client")));
    }
    let mut results = Results::default();
    let has = |c: char| args.scenarios.contains(c);
    for run in 0..args.runs {
        for (lib, peer) in &peers {
            if has('A') {
                let m = scenarios::uncontended(*lib, peer, &admin, &args.sizes, run).await;
                results.add('A', *lib, m);
            }
        }
        for (lib, peer) in &peers {
            if has('B') {
                let m = scenarios::parallel(*lib, peer, &admin, &args.sizes, run).await;
                results.add('B', *lib, m);
            }
        }
        for (lib, peer) in &peers {
            if has('C') {
                match lib.not_in('C') {
                    Some(why) => results.not_applicable('C', *lib, why),
                    None => {
                        let m = scenarios::contention(*lib, peer, &admin, &args.sizes, run).await;
                        results.add('C', *lib, m);
                    }
                }
            }
        }
        if has('D') && run < args.d_runs {
            for (lib, _) in &peers {
                match lib.not_in('D') {
                    Some(why) => results.not_applicable('D', *lib, why),
                    None => {
                        let m = watchdog::watchdog(*lib, &url, &admin, &args.sizes, run).await;
                        results.add('D', *lib, m);
                    }
                }
            }
        }
        if has('E') {
            layer::layer(&url, &admin, &args.sizes, &mut results).await;
        }
        eprintln!("run {} done after {:.0?}", run + 1, started.elapsed());
    }
    print!("{}", results.render(&args.sizes, args.runs, args.d_runs));
    println!(
        "\n_{}; total {:.0?}._",
        machine(&version),
        started.elapsed()
    );
}
