//! What a service at the edge relies on, on every topology: `ping()` for readiness, and a
//! forced release that the holder's client hears at once (its guard's `lost()` fires long
//! before the watchdog's next renewal could show it).

use std::time::Duration;

use distlock_tests::locks::{wait_until, GENEROUS};
use distlock_tests::sentinel::{RedisSentinels, SERVICE};
use distlock_tests::{RedisCluster, RedisServer};
use lock_core::{LockClient, LockClientBuilder};
use tokio::time::Instant;

/// The Redis servers behind one topology, kept alive for the test.
enum Setup {
    Single(RedisServer),
    Sentinel(RedisSentinels),
    Cluster(RedisCluster),
    Redlock(Vec<RedisServer>),
}

impl Setup {
    fn start(kind: &str) -> Self {
        match kind {
            "single" => Self::Single(RedisServer::start()),
            "sentinel" => Self::Sentinel(RedisSentinels::start()),
            "cluster" => Self::Cluster(RedisCluster::start(3, 0)),
            "redlock" => Self::Redlock((0..3).map(|_| RedisServer::start()).collect()),
            _ => unreachable!("{kind}"),
        }
    }

    /// A client with the default lease (30 s): its watchdog renews every 10 s.
    fn client(&self) -> LockClient {
        let builder: LockClientBuilder = match self {
            Self::Single(server) => LockClient::builder(server.url()),
            Self::Sentinel(set) => LockClient::sentinel(set.sentinel_urls(), SERVICE),
            Self::Cluster(cluster) => LockClient::cluster(cluster.seed_urls()),
            Self::Redlock(nodes) => LockClient::redlock(nodes.iter().map(RedisServer::url)),
        };
        builder
            .command_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    }

    /// Every data server (where a subscription could be).
    fn data_urls(&self) -> Vec<String> {
        match self {
            Self::Single(server) => vec![server.url()],
            Self::Sentinel(set) => {
                vec![format!("redis://127.0.0.1:{}", set.master_port().unwrap())]
            }
            Self::Cluster(cluster) => cluster.seed_urls(),
            Self::Redlock(nodes) => nodes.iter().map(RedisServer::url).collect(),
        }
    }
}

/// Subscribers of `channel` on all `urls`, plain and sharded.
async fn listeners(urls: &[String], channel: &str) -> i64 {
    let mut total = 0;
    for url in urls {
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for sub in ["NUMSUB", "SHARDNUMSUB"] {
            let reply: (String, i64) = redis::cmd("PUBSUB")
                .arg(sub)
                .arg(channel)
                .query_async(&mut conn)
                .await
                .unwrap();
            total += reply.1;
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_topology_answers_ping_and_hears_a_forced_release() {
    for kind in ["single", "sentinel", "cluster", "redlock"] {
        let setup = Setup::start(kind);
        let (holder, operator) = (setup.client(), setup.client());
        holder
            .ping()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(holder.is_reachable(), "{kind}");
        let guard = holder.lock("revoked").await.unwrap();
        let channel = format!("distlock:revoke:{{{}}}", holder.id());
        let urls = setup.data_urls();
        wait_until("the holder listens for revocations", GENEROUS, || {
            let (urls, channel) = (urls.clone(), channel.clone());
            async move { listeners(&urls, &channel).await >= 1 }
        })
        .await;
        let forced = Instant::now();
        let told = operator.force_release_notified("revoked").await.unwrap();
        assert!(told.is_some_and(|n| n >= 1), "{kind}: {told:?}");
        // The watchdog's first renewal is 10 s after the acquisition: only the message can
        // make `lost()` fire before that.
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{kind}: lost() did not fire within 5 s"));
        let latency = forced.elapsed();
        println!("edge: {kind}: force release to lost(): {latency:?}");
        assert!(guard.lost_error().is_lost());
        assert!(!guard.is_held());
        // Nothing was held any more: a second forced release tells nobody.
        assert_eq!(
            operator.force_release_notified("revoked").await.unwrap(),
            None
        );
        drop(guard);
    }
}

/// The negative control: without a forced release `lost()` stays pending (the detection
/// above is the message, not a timer).
#[tokio::test]
async fn without_a_forced_release_lost_does_not_fire() {
    let setup = Setup::start("single");
    let holder = setup.client();
    let guard = holder.lock("kept").await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), guard.lost())
            .await
            .is_err()
    );
    guard.release().await.unwrap();
}

/// A stopped server fails `ping()` as an outage and `is_reachable()` turns false; back up,
/// both recover.
#[tokio::test]
async fn ping_reports_an_outage_and_the_recovery() {
    let Setup::Single(mut server) = Setup::start("single") else {
        unreachable!()
    };
    let client = LockClient::builder(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    client.ping().await.unwrap();
    server.stop();
    let err = client.ping().await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(!client.is_reachable());
    server.restart();
    wait_until("ping answers again", GENEROUS, || async {
        client.ping().await.is_ok()
    })
    .await;
    assert!(client.is_reachable());
}
