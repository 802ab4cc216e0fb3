//! `#[distributed_lock]` labels its metrics (feature `metrics`) with its key template, never
//! with the rendered name. Read through the test support's recorder.

use distlock_tests::locks::client;
use distlock_tests::metrics::{counters, install};
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};

#[distributed_lock(key = "metric_<shop>:<id>", client = locks)]
async fn labelled(locks: &LockClient, shop: &str, id: u64) -> Result<(), LockError> {
    Ok(())
}

/// Calls on two names of one template count under one series, `template` = the template.
#[tokio::test]
async fn macro_labels_metrics_with_its_template() {
    install();
    let server = RedisServer::start();
    let locks = client(&server.url());
    labelled(&locks, "a", 1).await.expect("first name");
    labelled(&locks, "b", 2).await.expect("second name");
    // The recorder is the test process's: other tests of this target may have counted their
    // own locks (under plain `cargo test`), so only this template's series are looked at.
    let ours: Vec<_> = counters("distlock_acquisitions_total")
        .into_iter()
        .filter(|(labels, _)| labels.iter().any(|l| l.starts_with("template=metric_")))
        .collect();
    assert_eq!(
        ours,
        [(
            vec![
                "outcome=acquired".to_owned(),
                "template=metric_<shop>:<id>".to_owned()
            ],
            2
        )]
    );
}
