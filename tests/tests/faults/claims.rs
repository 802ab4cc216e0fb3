//! Fault suite, claims: a live waiter never loses its hand-off to the claim. Clients hand one
//! name to each other by message, each holding it for a time chosen to cover every path of
//! a claim — released before its extension was due (no call), extended from the background,
//! held past a claim, and taken after a wait long enough that the claim is extended before
//! the acquisition answers. No hold may be lost and no claim missed
//! (`distlock_claims_missed_total`). The control is a waiter 2 s away (a proxy's latency):
//! its grant arrives after its claim ran out, and the counter sees it.
//!
//! `DISTLOCK_CLAIM_ROUNDS=40` runs that many rounds per task (the lab log's load figures,
//! beside two CPU hogs); CI runs 2.

use std::time::Duration;

use distlock_tests::locks::{client, exists, lock_key, queue_key, queued, wait_until, GENEROUS};
use distlock_tests::metrics::{counter, install};
use distlock_tests::{RedisServer, TcpProxy};
use lock_core::LockClient;

/// Holds long enough to cover each path of a claim (1.5 s): released at once, before the
/// background extension (due with half the claim left), after it, and past a whole claim.
const HOLDS_MS: [u64; 5] = [0, 30, 500, 900, 1_700];

fn rounds() -> usize {
    std::env::var("DISTLOCK_CLAIM_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_waiters_keep_every_hand_off() {
    install();
    let server = RedisServer::start();
    let clients: Vec<LockClient> = (0..4).map(|_| client(&server.url())).collect();
    let tasks = clients
        .iter()
        .cycle()
        .take(8)
        .enumerate()
        .map(|(t, locks)| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let mut lost = 0;
                for round in 0..rounds() {
                    let hold = Duration::from_millis(HOLDS_MS[(t + round) % HOLDS_MS.len()]);
                    let guard = locks
                        .lock("claims")
                        .metrics_label("claims")
                        .wait(Duration::from_secs(300))
                        .await
                        .expect("granted");
                    tokio::time::sleep(hold).await;
                    if !guard.is_held() || guard.release().await.is_err() {
                        lost += 1;
                    }
                }
                lost
            })
        });
    let mut lost = 0;
    for task in futures_util::future::join_all(tasks).await {
        lost += task.expect("the task");
    }
    let missed = counter("distlock_claims_missed_total", &["template=claims"]);
    let handed = counter("distlock_wakeups_total", &["by=message", "template=claims"]);
    println!(
        "claims: {} holds, {handed} woken by message, {lost} lost, {missed} claims missed",
        8 * rounds()
    );
    assert_eq!((lost, missed), (0, 0), "holds lost, claims missed");
    assert!(handed > 0, "no hand-off by message: nothing was tested");
}

/// Control: a waiter whose grant takes longer than a claim to reach it (3 s of latency each
/// way) misses its claim, and the counter records the miss: the claim runs out, another
/// client takes the free lock before the far waiter's late calls land, and the far one's
/// late grant is refused (or seen superseded). It goes on waiting and gets the lock after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_a_grant_that_arrives_after_its_claim_is_a_missed_claim() {
    install();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, thief) = (client(&server.url()), client(&server.url()));
    let held = holder.lock("far").await.unwrap();
    let proxy = TcpProxy::start(server.addr());
    let far = distlock_tests::locks::builder(&proxy.url())
        .command_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let waiting = tokio::spawn(async move {
        far.lock("far")
            .metrics_label("far")
            .wait(Duration::from_secs(120))
            .await
    });
    wait_until("the far waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, &queue_key("far")).await == 1 }
    })
    .await;
    proxy.set_latency(Duration::from_secs(3));
    held.release().await.unwrap();
    // The claim runs out unextended (1.5 s); the far waiter's calls land after 3 s.
    wait_until("the claim ran out", GENEROUS, || {
        let mut conn = conn.clone();
        async move { !exists(&mut conn, &lock_key("far")).await }
    })
    .await;
    let taken = thief.lock("far").try_acquire().await.unwrap();
    let taken = taken.expect("the free lock, before the far waiter's late calls land");
    tokio::time::sleep(Duration::from_secs(8)).await;
    proxy.set_latency(Duration::ZERO);
    taken.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the far waiter ends")
        .unwrap()
        .expect("it gets the lock after the thief");
    let missed = counter("distlock_claims_missed_total", &["template=far"]);
    assert!(
        missed >= 1,
        "the late grant's claim was not counted as missed"
    );
    guard.release().await.unwrap();
    let _ = conn;
}
