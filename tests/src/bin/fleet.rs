//! Instances of a fleet in their own processes, for the "run once across the fleet" tests
//! (`tests/tests/fleet/`): scheduled jobs fired on a skewed clock, and election campaigners
//! that tests can SIGSTOP, SIGCONT and SIGKILL. It reports on stdout, one line per event,
//! reads commands on stdin, and exits when stdin closes or its time bound passes.
//!
//! ```text
//! fleet job <lock url> <store url> <name> <start ns> <period ms> <fires> <offset ms> <least ms> <most ms>
//!     Fires the job <name> <fires> times: fire k when this process's clock, which runs
//!     <offset ms> ahead of CLOCK_MONOTONIC, reads <start ns> + k × period (so a process
//!     with a larger offset fires earlier). Each fire runs `client.job(name)` with
//!     hold_at_least <least ms> (0: none) and hold_at_most <most ms>; a body that runs
//!     counts the fire in the store (`HINCRBY fires:<name> <k> 1`). Prints
//!     `FIRE k=… ran=0|1 delay_ms=…` per fire (how long after it was due the attempt ended:
//!     scheduling delay and round trips), then `DONE ran=… skipped=…`.
//! fleet hang <lock url> - <name> <most ms>
//!     Runs the job <name> with hold_at_most <most ms> and a body that never ends; prints
//!     `RUNNING` once it runs (the test then SIGKILLs it).
//! fleet elect <lock url> <store url> <name> <lease ms> <value>
//!     Campaigns for the election <name> (terms of lease <lease ms>, proclaiming <value>) in
//!     a loop. Leading, it prints `LEADER token=…`, then every 20 ms while `is_leader()`
//!     writes its token to the fenced store `elect:<name>` and pushes it on the raw log
//!     `log:<name>` (the overlap detector's input). When the term is lost it writes once
//!     more with the old token, prints `LOST write=accepted|rejected`, and campaigns again.
//!     On stdin: `RESIGN` resigns (prints `RESIGNED token=…`) and campaigns again.
//! ```

use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::store::FencedStore;
use lock_core::job::JobOutcome;
use lock_core::LockClient;
use redis::AsyncCommands;
use tokio::sync::mpsc;

/// No instance outlives this, whatever the parent does.
const LIFETIME: Duration = Duration::from_secs(300);
/// A leader writes this often.
const WRITE_EVERY: Duration = Duration::from_millis(20);

fn usage() -> ! {
    eprintln!(
        "usage: fleet job <lock url> <store url> <name> <start ns> <period ms> <fires> <offset ms> <least ms> <most ms>\n       \
         fleet hang <lock url> - <name> <most ms>\n       \
         fleet elect <lock url> <store url> <name> <lease ms> <value>"
    );
    std::process::exit(2)
}

fn number(arg: Option<&String>) -> u64 {
    arg.and_then(|a| a.parse().ok()).unwrap_or_else(|| usage())
}

fn millis(arg: Option<&String>) -> Duration {
    Duration::from_millis(number(arg))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        usage();
    }
    let (url, store_url, name) = (&args[1], &args[2], &args[3]);
    let work = async {
        match args[0].as_str() {
            "job" => job(url, store_url, name, &args[4..]).await,
            "hang" => hang(url, name, millis(args.get(4))).await,
            "elect" => elect(url, store_url, name, millis(args.get(4)), &args[5]).await,
            _ => usage(),
        }
    };
    if tokio::time::timeout(LIFETIME, work).await.is_err() {
        eprintln!("fleet: lifetime of {LIFETIME:?} reached");
        std::process::exit(3);
    }
}

async fn client(url: &str, lease: Option<Duration>) -> LockClient {
    let mut builder = LockClient::builder(url).command_timeout(Duration::from_secs(5));
    if let Some(lease) = lease {
        builder = builder.lease(lease).watchdog_interval(lease / 3);
    }
    builder.build().expect("valid client")
}

async fn store(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("store url")
        .get_multiplexed_async_connection()
        .await
        .expect("store connection")
}

/// `fleet job`: fires on this process's skewed clock.
async fn job(url: &str, store_url: &str, name: &str, rest: &[String]) {
    let start_ns = number(rest.first());
    let period = millis(rest.get(1));
    let fires = number(rest.get(2));
    let offset = millis(rest.get(3));
    let least = millis(rest.get(4));
    let most = millis(rest.get(5));
    let client = client(url, None).await;
    let counts = store(store_url).await;
    let (mut ran, mut skipped) = (0, 0);
    for k in 0..fires {
        // This clock reads CLOCK_MONOTONIC + offset: it reaches start + k × period `offset`
        // earlier than the true clock does.
        let due_ns = start_ns + k * u64::try_from(period.as_nanos()).unwrap();
        let due_ns = due_ns.saturating_sub(u64::try_from(offset.as_nanos()).unwrap());
        let now_ns = monotonic_ns();
        if due_ns > now_ns {
            tokio::time::sleep(Duration::from_nanos(due_ns - now_ns)).await;
        }
        let mut request = client.job(name).hold_at_most(most);
        if !least.is_zero() {
            request = request.hold_at_least(least);
        }
        let mut counts = counts.clone();
        let fire = request.run(async move {
            let _: i64 = counts
                .hincr(format!("fires:{name}"), k, 1)
                .await
                .expect("HINCRBY");
        });
        let outcome = fire.await;
        // How late the attempt ended against its due time: a stalled process shows here.
        let delay_ms = monotonic_ns().saturating_sub(due_ns) / 1_000_000;
        let ran_here = match outcome {
            Ok(JobOutcome::Ran(())) => 1,
            Ok(JobOutcome::Skipped(_)) => 0,
            Err(error) => {
                println!("ERROR fire={k} {error}");
                0
            }
        };
        (ran, skipped) = (ran + ran_here, skipped + 1 - ran_here);
        println!("FIRE k={k} ran={ran_here} delay_ms={delay_ms}");
    }
    println!("DONE ran={ran} skipped={skipped}");
}

/// `fleet hang`: holds the job's name with a body that never ends.
async fn hang(url: &str, name: &str, most: Duration) {
    let client = client(url, None).await;
    let fire = client.job(name).hold_at_most(most).run(async {
        println!("RUNNING pid={}", std::process::id());
        std::future::pending::<()>().await;
    });
    match fire.await {
        Ok(JobOutcome::Skipped(_)) => println!("SKIPPED"),
        Ok(JobOutcome::Ran(())) => unreachable!("the body never ends"),
        Err(error) => println!("ERROR {error}"),
    }
}

/// Lines of stdin, read on a thread (the channel closes at end of input).
fn commands() -> mpsc::UnboundedReceiver<String> {
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

/// `fleet elect`: campaigns, leads with fenced writes, and campaigns again after a loss or
/// a resignation.
async fn elect(url: &str, store_url: &str, name: &str, lease: Duration, value: &str) {
    let client = client(url, Some(lease)).await;
    let election = client.election(name).value(value);
    let mut fenced = FencedStore::connect(store_url, &format!("elect:{name}"))
        .await
        .expect("fenced store");
    let mut raw = store(store_url).await;
    let log = format!("log:{name}");
    let mut commands = commands();
    let mut written = 0;
    loop {
        let term = tokio::select! {
            term = election.campaign() => term.expect("campaign"),
            command = commands.recv() => match command {
                None => return,
                Some(_) => continue,
            },
        };
        let token = term.fencing_token();
        println!("LEADER token={token} pid={}", std::process::id());
        let lost = term.lost();
        tokio::pin!(lost);
        loop {
            tokio::select! {
                biased;
                () = &mut lost => {
                    let write = fenced.write(token, written).await.expect("store");
                    let _: i64 = raw.rpush(&log, token).await.expect("RPUSH");
                    let write = if write.is_ok() { "accepted" } else { "rejected" };
                    println!("LOST token={token} write={write}");
                    break;
                }
                command = commands.recv() => match command.as_deref() {
                    Some("RESIGN") => {
                        let outcome = term.resign().await;
                        println!("RESIGNED token={token} ok={}", u8::from(outcome.is_ok()));
                        break;
                    }
                    None => return,
                    Some(_) => {}
                },
                () = tokio::time::sleep(WRITE_EVERY) => {
                    if term.is_leader() {
                        written += 1;
                        let _ = fenced.write(token, written).await.expect("store");
                        let _: i64 = raw.rpush(&log, token).await.expect("RPUSH");
                    }
                }
            }
        }
    }
}
