//! Run once across the fleet: scheduled jobs (`LockClient::job`, ShedLock's semantics) and
//! leader election (`LockClient::election`), with instances in their own processes (the
//! `fleet` binary of this package) where the behaviour is about several instances, and on
//! every topology.

mod election;
mod jobs;
mod observe;
mod skew;
mod topologies;

use distlock_tests::locks::{keys_left, pttl, wait_until, GENEROUS};
use lock_core::election::{Election, Observe};
use lock_core::LockClient;

/// Asserts that every key left on `server` expires, within `at_most` ms when given.
async fn every_key_expires(server: &distlock_tests::RedisServer, at_most: Option<i64>) {
    let client = server.client();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for key in keys_left(&mut conn).await {
        let ttl = pttl(&mut conn, &key).await;
        // -2: it expired between the listing and the PTTL, as it should.
        assert!(
            ttl == -2 || (ttl > 0 && at_most.is_none_or(|max| ttl <= max)),
            "{key} has PTTL {ttl}"
        );
    }
}

/// Starts `election`'s campaign on a task and returns once `client` (the election's) waits
/// in it, so a resignation hands over to it.
async fn queued_campaign(
    client: &LockClient,
    election: Election,
) -> tokio::task::JoinHandle<Result<lock_core::election::Leadership, lock_core::LockError>> {
    let campaign = tokio::spawn(async move { election.campaign().await });
    wait_until("the campaign waits", GENEROUS, || async {
        client.waited_channels() > 0
    })
    .await;
    campaign
}

/// The next change `observe` reports, within the generous bound.
async fn next(observe: &mut Observe) -> Option<lock_core::election::Leader> {
    use futures_util::StreamExt as _;
    tokio::time::timeout(GENEROUS, observe.next())
        .await
        .expect("a change within the bound")
        .expect("the stream never ends")
}
