//! Both shapes on every topology, from one table of cases: on one server, Sentinel and a
//! Cluster a job skips and lingers and an election campaigns, hands over on resign and is
//! observed; under Redlock jobs work (the linger on every node) and elections answer the
//! documented `InvalidRequest`.

use std::time::Duration;

use crate::{next, queued_campaign};
use distlock_tests::locks::GENEROUS;
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::job::JobOutcome;
use lock_core::{LockClient, LockClientBuilder, LockError};

/// The job's behaviour on a topology: a fire runs, a concurrent one is skipped, and with
/// hold_at_least the next fire within the minimum is skipped too.
async fn jobs_work(make: impl Fn() -> LockClientBuilder) {
    let (a, b) = (make().build().unwrap(), make().build().unwrap());
    let least = Duration::from_secs(3);
    // B fires while A's body runs (told by A's body: no race between the two acquisitions).
    let (running, is_running) = tokio::sync::oneshot::channel();
    let (first, second) = tokio::join!(
        a.job("report_7").hold_at_least(least).run(async {
            running.send(()).unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }),
        async {
            is_running.await.unwrap();
            b.job("report_7").run(async {}).await
        }
    );
    assert_eq!(first.unwrap(), JobOutcome::Ran(()));
    assert!(second.unwrap().is_skipped(), "ran while the first fire ran");
    // Lingering: still held after the body, by nobody's running fire.
    let again = b.job("report_7").run(async {}).await.unwrap();
    assert!(again.is_skipped(), "the minimum hold did not linger");
    let later = b
        .job("report_7")
        .wait(GENEROUS)
        .run(async {})
        .await
        .unwrap();
    assert_eq!(later, JobOutcome::Ran(()));
}

/// The election's behaviour on a topology: campaign, observe, hand over on resign.
async fn elections_work(make: impl Fn() -> LockClientBuilder) {
    let (a, b, watcher) = (
        make().build().unwrap(),
        make().build().unwrap(),
        make().build().unwrap(),
    );
    let mut observe = watcher.election("leader").observe();
    assert_eq!(next(&mut observe).await, None);
    let term_a = a.election("leader").value("a").campaign().await.unwrap();
    assert_eq!(next(&mut observe).await.unwrap().value(), Some("a"));
    let campaign_b = queued_campaign(&b, b.election("leader").value("b")).await;
    let token_a = term_a.fencing_token();
    term_a.resign().await.unwrap();
    let term_b = tokio::time::timeout(GENEROUS, campaign_b)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(term_b.fencing_token() > token_a);
    let seen = next(&mut observe).await.unwrap();
    assert_eq!(
        (seen.value(), seen.fencing_token()),
        (Some("b"), term_b.fencing_token())
    );
    let leader = a.election("leader").leader().await.unwrap().unwrap();
    assert_eq!(leader.fencing_token(), term_b.fencing_token());
    term_b.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_server() {
    let server = RedisServer::start();
    let make = || LockClient::builder(server.url()).command_timeout(Duration::from_secs(5));
    jobs_work(make).await;
    elections_work(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let make = || LockClient::cluster(cluster.seed_urls()).command_timeout(Duration::from_secs(5));
    jobs_work(make).await;
    elections_work(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sentinel() {
    let set = RedisSentinels::start();
    let make = || {
        LockClient::sentinel(set.sentinel_urls(), SERVICE).command_timeout(Duration::from_secs(5))
    };
    jobs_work(make).await;
    elections_work(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_redlock_jobs_work_and_elections_are_refused() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let make = || LockClient::redlock(urls.clone()).command_timeout(Duration::from_secs(5));
    jobs_work(make).await;
    let locks = make().build().unwrap();
    let election = locks.election("leader");
    for error in [
        election.campaign().await.map(drop).unwrap_err(),
        election.leader().await.map(drop).unwrap_err(),
    ] {
        assert!(
            matches!(error, LockError::InvalidRequest { .. })
                && error.to_string().contains("leader")
                && error.to_string().contains("Redlock"),
            "{error}"
        );
    }
}
