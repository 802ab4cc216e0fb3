//! The README's main demo, with small numbers: the distributed lock sells exactly the stock,
//! and so do guarded writes when a holder stalls past its lease (a plain write oversells).

use std::time::Duration;

use distlock_examples::oversell::cli::{self, Args};
use distlock_examples::oversell::{self, Guard, Settings};
use distlock_tests::RedisServer;

fn small() -> Settings {
    Settings {
        stock: 30,
        requests: 200,
        concurrency: 30,
        instances: 3,
        lock_wait: Duration::from_secs(60),
        stall: None,
    }
}

/// Three instances behind the layer: accepted = initial stock, final stock 0, oversold 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_lock_sells_exactly_the_stock() {
    let server = RedisServer::start();
    for _ in 0..2 {
        let report = oversell::run(&server.url(), &small(), Guard::Distributed, None)
            .await
            .expect("demo run");
        assert!(report.is_exact(), "{report:?}");
        assert_eq!(report.accepted, 30);
        assert_eq!(report.final_stock, 0);
        assert_eq!((report.sold_out, report.failed), (170, 0), "{report:?}");
    }
}

/// The stock in Redis beside the lock, each unit taken with a guarded `DECR`: exact too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_sell_exactly_the_stock() {
    let server = RedisServer::start();
    let report = oversell::run(&server.url(), &small(), Guard::Guarded, None)
        .await
        .expect("demo run");
    assert!(report.is_exact(), "{report:?}");
    assert_eq!((report.accepted, report.final_stock), (30, 0), "{report:?}");
}

/// One purchase in ten stalls 900 ms between its check and its write, past its lock's
/// 300 ms lease: the guarded `DECR` after the stall is refused and nothing is oversold,
/// while the plain write after it — the negative control — oversells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_never_oversell_when_a_holder_stalls_past_its_lease() {
    let server = RedisServer::start();
    let stalling = Settings {
        stall: Some(Duration::from_millis(900)),
        ..small()
    };
    let guarded = oversell::run(&server.url(), &stalling, Guard::Guarded, None)
        .await
        .expect("demo run");
    assert!(guarded.is_exact(), "{guarded:?}");
    assert_eq!(guarded.oversold(), 0, "{guarded:?}");
    assert!(
        guarded.failed > 0,
        "no stalled write was refused: {guarded:?}"
    );
    let plain = oversell::run(&server.url(), &stalling, Guard::Distributed, None)
        .await
        .expect("demo run");
    assert!(
        plain.oversold() > 0,
        "the control did not oversell: {plain:?}"
    );
    println!(
        "oversell with stalls: guarded oversold {} (refused {}), plain oversold {}",
        guarded.oversold(),
        guarded.failed,
        plain.oversold()
    );
}

/// The unguarded run completes and reports consistently (whether it oversells depends on
/// scheduling, so that is not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mutex_run_reports_consistently() {
    let server = RedisServer::start();
    let report = oversell::run(&server.url(), &small(), Guard::LocalMutex, None)
        .await
        .expect("demo run");
    assert_eq!(report.accepted + report.sold_out + report.failed, 200);
}

/// The `oversell` command as the example runs it, from its command line to its exit status,
/// with the default lock wait: both runs, the table and the strict verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_prints_the_exact_verdict_and_exits_0() {
    let server = RedisServer::start();
    let argv = ["oversell", "--stock", "30", "--requests", "200"];
    let args = Args::from_command_line(argv.iter().chain(&["--concurrency", "30", "--quiet"]))
        .expect("valid arguments");
    let mut out = Vec::new();
    let status = cli::run(&args, &server.url(), &mut out).await;
    let out = String::from_utf8(out).unwrap();
    assert_eq!(status, 0, "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("local Mutex") || l.starts_with("DistributedLockLayer"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    // DistributedLockLayer  stock accepted "sold out" "busy/err" final oversold …
    assert_eq!(rows[1][1..7], ["30", "30", "170", "0", "0", "0"], "{out}");
    assert!(
        out.contains("\nwith the distributed lock: exactly 30 sold, oversold 0\n"),
        "{out}"
    );
}
