//! Least privilege on a Redis Cluster: an application user with `FCALL` and no other
//! scripting runs every path once an operator has loaded the library on every master (the
//! one-server tests are in the core target).

use std::time::Duration;

use distlock_tests::acl::{app_url, representative_paths, set_app_user, APP_RULE, CLUSTER_EXTRA};
use distlock_tests::locks::GENEROUS;
use distlock_tests::RedisCluster;
use lock_core::{LockClient, LockError};

/// Before the operator's load the application's first call is told to run it; after it,
/// every path runs as the application's user, each acquisition awaiting a replica by
/// default: the client reads the shards' replicas (`CLUSTER SLOTS`) and waits (`WAIT`) with
/// the rule's commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_user_without_eval_runs_every_path_on_a_cluster() {
    let cluster = RedisCluster::start(3, 1);
    let rule = [APP_RULE, CLUSTER_EXTRA].concat();
    // ACLs do not replicate: every node, replicas too (one may be promoted).
    for node in cluster.nodes() {
        set_app_user(&mut node.conn().await, &rule).await;
    }
    let app = LockClient::cluster(cluster.seed_urls().iter().map(|url| app_url(url)))
        .command_timeout(Duration::from_secs(5));
    let first = app.clone().build().unwrap();
    let error = first.lock("unloaded").wait(GENEROUS).await.unwrap_err();
    assert!(
        matches!(error, LockError::LibraryNotLoaded { .. }),
        "{error:?}"
    );
    let admin = LockClient::cluster(cluster.seed_urls()).build().unwrap();
    admin
        .load_functions()
        .await
        .expect("the operator's load on every master");
    first
        .lock("unloaded")
        .await
        .expect("loaded")
        .release()
        .await
        .unwrap();
    representative_paths(&app).await;
}
