//! `#[distributed_lock]` labels its metrics (feature `metrics`) with its key template, never
//! with the rendered name. Read through `metrics-util`'s debugging recorder, as in
//! `ops_metrics.rs`; one recorder for this binary.

use std::sync::OnceLock;

use distlock_tests::locks::client;
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// The counters named `name` recorded since the last read, as (sorted `label=value` pairs,
/// value).
fn counters(name: &str) -> Vec<(Vec<String>, u64)> {
    let snapshot = snapshotter().snapshot().into_vec();
    snapshot
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) if key.key().name() == name => {
                let mut labels: Vec<String> = key
                    .key()
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                labels.sort();
                Some((labels, n))
            }
            _ => None,
        })
        .collect()
}

#[distributed_lock(key = "metric_<shop>:<id>", client = locks)]
async fn labelled(locks: &LockClient, shop: &str, id: u64) -> Result<(), LockError> {
    Ok(())
}

/// Calls on two names of one template count under one series, `family` = the template.
#[tokio::test]
async fn macro_labels_metrics_with_its_template() {
    snapshotter();
    let server = RedisServer::start();
    let locks = client(&server.url());
    labelled(&locks, "a", 1).await.expect("first name");
    labelled(&locks, "b", 2).await.expect("second name");
    assert_eq!(
        counters("distlock_acquisitions_total"),
        [(
            vec![
                "family=metric_<shop>:<id>".to_owned(),
                "outcome=acquired".to_owned()
            ],
            2
        )]
    );
}
