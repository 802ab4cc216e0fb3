//! The README's main demo, with small numbers: the distributed lock sells exactly the stock.

use std::time::Duration;

use distlock_examples::oversell::{self, Guard, Settings};
use distlock_tests::RedisServer;

fn small() -> Settings {
    Settings {
        stock: 30,
        requests: 200,
        concurrency: 30,
        instances: 3,
        lock_wait: Duration::from_secs(60),
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
        assert_eq!(report.accepted + report.refused, 200);
    }
}

/// The unguarded run completes and reports consistently (whether it oversells depends on
/// scheduling, so that is not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mutex_run_reports_consistently() {
    let server = RedisServer::start();
    let report = oversell::run(&server.url(), &small(), Guard::LocalMutex, None)
        .await
        .expect("demo run");
    assert_eq!(report.accepted + report.refused, 200);
    assert!(report.oversold() >= 0, "{report:?}");
}
