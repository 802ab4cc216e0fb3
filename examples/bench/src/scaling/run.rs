//! The scaling bench's parent: starts the children of each point, measures Redis around
//! them, prints the tables and writes the figure.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use crate::plot::{self, Panel, Series};
use crate::server::{Admin, Server};
use crate::worker::Lib;
use crate::Args;

/// A child process of one point, with its output as lines.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Worker {
    fn spawn(args: &[String]) -> Self {
        let exe = std::env::current_exe().expect("own path");
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a child");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn tell(&mut self, word: &str) {
        writeln!(self.stdin, "{word}").ok();
        self.stdin.flush().ok();
    }

    /// The numbers of the next line starting with `word`, or None after `within`.
    async fn expect(&mut self, word: &str, within: Duration) -> Option<Vec<f64>> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.lines.try_recv() {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(word) {
                        return Some(
                            rest.split_whitespace()
                                .filter_map(|v| v.parse().ok())
                                .collect(),
                        );
                    }
                }
                Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Bounded: a child that is still there when its point is over is stopped.
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// What Redis did during a point.
struct Redis {
    usec: f64,
    /// distlock's FCALL/FCALL_RO, the peers' EVALSHA (see `CmdStats::lua`).
    lua_calls: f64,
    lua_usec: f64,
    cpu_us: f64,
}

async fn used_cpu(admin: &Admin) -> f64 {
    let text = admin.info("cpu").await;
    let field = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    (field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6
}

async fn used_memory(admin: &Admin) -> f64 {
    let text = admin.info("memory").await;
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn redis_since(admin: &Admin, cpu0: f64, lib: Lib) -> Redis {
    let stats = admin.commandstats().await;
    let (lua_calls, lua_usec) = stats.lua();
    Redis {
        usec: stats.usec(lib == Lib::Baseline) as f64,
        lua_calls: lua_calls as f64,
        lua_usec: lua_usec as f64,
        cpu_us: used_cpu(admin).await - cpu0,
    }
}

/// One contended point's figures.
struct Contended {
    per_sec: f64,
    least: f64,
    most: f64,
    lua_us: f64,
    calls_per_acq: f64,
    usec_per_acq: f64,
    cpu_per_acq: f64,
    kb_per_waiter: f64,
    keys_mid: u64,
    keys_left: u64,
}

async fn contended(
    admin: &Admin,
    url: &str,
    lib: Lib,
    waiters: usize,
    procs: usize,
    secs: f64,
) -> Option<Contended> {
    admin.reset().await;
    let procs = procs.min(waiters).max(1);
    let per = waiters / procs;
    let mut workers: Vec<Worker> = (0..procs)
        .map(|p| {
            Worker::spawn(&[
                "--child".into(),
                "contend".into(),
                "--lib".into(),
                lib.code().into(),
                "--url".into(),
                url.into(),
                "--count".into(),
                per.to_string(),
                "--secs".into(),
                secs.to_string(),
                "--id".into(),
                format!("p{p}"),
            ])
        })
        .collect();
    let mut rss0 = 0.0;
    for w in &mut workers {
        rss0 += w.expect("READY", Duration::from_secs(30)).await?[0];
    }
    admin.reset_stats().await;
    let cpu0 = used_cpu(admin).await;
    for w in &mut workers {
        w.tell("go");
    }
    tokio::time::sleep(Duration::from_secs_f64(secs / 2.0)).await;
    let keys_mid = admin.dbsize().await;
    let (mut window, mut total, mut least, mut most, mut rss_mid) = (0.0, 0.0, f64::MAX, 0.0, 0.0);
    let cap = Duration::from_secs_f64(secs + 90.0);
    for w in &mut workers {
        let done = w.expect("DONE", cap).await?;
        window += done[0];
        total += done[1];
        least = f64::min(least, done[2]);
        most = f64::max(most, done[3]);
        rss_mid += done[4];
    }
    let redis = redis_since(admin, cpu0, lib).await;
    let total = total.max(1.0);
    Some(Contended {
        per_sec: window / secs,
        least,
        most,
        lua_us: redis.lua_usec / redis.lua_calls.max(1.0),
        calls_per_acq: redis.lua_calls / total,
        usec_per_acq: redis.usec / total,
        cpu_per_acq: redis.cpu_us / total,
        kb_per_waiter: (rss_mid - rss0) / (procs * per) as f64,
        keys_mid,
        keys_left: admin.dbsize().await,
    })
}

/// One point of names held at once.
struct Held {
    cycles_per_sec: f64,
    usec_per_cycle: f64,
    cpu_per_cycle: f64,
    bytes_per_name: f64,
    keys_per_name: f64,
    redis_bytes_per_name: f64,
    keys_left: u64,
}

async fn held(admin: &Admin, url: &str, lib: Lib, names: usize) -> Option<Held> {
    admin.reset().await;
    let mem0 = used_memory(admin).await;
    let mut w = Worker::spawn(&[
        "--child".into(),
        "hold".into(),
        "--lib".into(),
        lib.code().into(),
        "--url".into(),
        url.into(),
        "--count".into(),
        names.to_string(),
    ]);
    let rss0 = w.expect("READY", Duration::from_secs(30)).await?[0];
    admin.reset_stats().await;
    let cpu0 = used_cpu(admin).await;
    w.tell("go");
    let took = w.expect("HELD", Duration::from_secs(120)).await?;
    let keys = admin.dbsize().await;
    let mem = used_memory(admin).await - mem0;
    w.tell("release");
    let gave = w.expect("DONE", Duration::from_secs(120)).await?;
    let redis = redis_since(admin, cpu0, lib).await;
    let n = names as f64;
    Some(Held {
        cycles_per_sec: n / (took[1] + gave[0]),
        usec_per_cycle: redis.usec / n,
        cpu_per_cycle: redis.cpu_us / n,
        bytes_per_name: (took[0] - rss0) * 1024.0 / n,
        keys_per_name: keys as f64 / n,
        redis_bytes_per_name: mem / n,
        keys_left: admin.dbsize().await,
    })
}

fn libs(codes: &[String]) -> Vec<Lib> {
    codes.iter().filter_map(|c| Lib::parse(c)).collect()
}

pub async fn parent(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let waiters = args.waiters.clone().unwrap_or(if args.quick {
        vec![4, 64, 1024]
    } else {
        vec![4, 16, 64, 256, 1024]
    });
    let names = args.names.clone().unwrap_or(if args.quick {
        vec![1, 100, 10_000]
    } else {
        vec![1, 10, 100, 1_000, 10_000]
    });
    let secs = args.secs.unwrap_or(if args.quick { 1.5 } else { 3.0 });
    let server = Server::start()?;
    let admin = Admin::connect(&server.url).await?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "Redis {} on loopback; {} cores; load average at start {}",
        admin.version().await,
        std::thread::available_parallelism().map_or(0, usize::from),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );

    let contenders = libs(&args.contenders);
    println!(
        "\n### Waiters on one name ({} processes, {secs} s per point, libraries in turn)\n",
        args.procs
    );
    println!(
        "Lua calls: distlock's FCALL of its functions, the peers' EVALSHA of their scripts.\n"
    );
    println!("| waiters | who | acquisitions/s | least / most per task | Lua µs/call | Lua calls/acq | Redis µs/acq (commandstats) | Redis µs/acq (used_cpu) | client kB/waiter | keys mid-run | keys left |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut by_lib: Vec<(Lib, Vec<(f64, Contended)>)> =
        contenders.iter().map(|&l| (l, Vec::new())).collect();
    for &w in &waiters {
        for (lib, points) in &mut by_lib {
            match contended(&admin, &server.url, *lib, w, args.procs, secs).await {
                Some(c) => {
                    println!(
                        "| {w} | {} | {:.0} | {:.0} / {:.0} | {:.1} | {:.2} | {:.1} | {:.1} | {:.1} | {} | {} |",
                        lib.label(),
                        c.per_sec,
                        c.least,
                        c.most,
                        c.lua_us,
                        c.calls_per_acq,
                        c.usec_per_acq,
                        c.cpu_per_acq,
                        c.kb_per_waiter,
                        c.keys_mid,
                        c.keys_left
                    );
                    points.push((w as f64, c));
                }
                None => println!(
                    "| {w} | {} | cut off or failed | | | | | | | | |",
                    lib.label()
                ),
            }
        }
    }

    let holders = libs(&args.holders);
    println!("\n### Names held at once (one process, 256 requests in flight)\n");
    println!("| names | who | cycles/s | Redis µs/cycle (commandstats) | Redis µs/cycle (used_cpu) | client bytes/name | keys/name | Redis bytes/name | keys left |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut held_by_lib: Vec<(Lib, Vec<(f64, Held)>)> =
        holders.iter().map(|&l| (l, Vec::new())).collect();
    for &n in &names {
        for (lib, points) in &mut held_by_lib {
            match held(&admin, &server.url, *lib, n).await {
                Some(h) => {
                    println!(
                        "| {n} | {} | {:.0} | {:.1} | {:.1} | {:.0} | {:.2} | {:.0} | {} |",
                        lib.label(),
                        h.cycles_per_sec,
                        h.usec_per_cycle,
                        h.cpu_per_cycle,
                        h.bytes_per_name,
                        h.keys_per_name,
                        h.redis_bytes_per_name,
                        h.keys_left
                    );
                    points.push((n as f64, h));
                }
                None => println!("| {n} | {} | failed | | | | | | |", lib.label()),
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nload average at end {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );

    let series = |f: &dyn Fn(&Contended) -> f64| -> Vec<Series> {
        by_lib
            .iter()
            .map(|(lib, points)| Series {
                label: lib.label().to_owned(),
                points: points.iter().map(|(x, c)| (*x, f(c))).collect(),
            })
            .collect()
    };
    let panels = [
        Panel {
            title: "Redis µs per acquisition (used_cpu)".into(),
            x_label: "waiters on one name".into(),
            series: series(&|c| c.cpu_per_acq),
        },
        Panel {
            title: "acquisitions per second".into(),
            x_label: "waiters on one name".into(),
            series: series(&|c| c.per_sec),
        },
        Panel {
            title: "Redis µs per acquire + release (used_cpu)".into(),
            x_label: "names held at once".into(),
            series: held_by_lib
                .iter()
                .map(|(lib, points)| Series {
                    label: lib.label().to_owned(),
                    // One name is the client's set-up, not a per-name cost.
                    points: (points.iter())
                        .filter(|(x, _)| *x >= 10.0)
                        .map(|(x, h)| (*x, h.cpu_per_cycle))
                        .collect(),
                })
                .collect(),
        },
    ];
    std::fs::write(&args.svg, plot::svg(&panels))?;
    println!("figure: {}", args.svg);
    Ok(())
}
