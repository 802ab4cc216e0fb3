//! Three campaigners in their own processes: exactly one leads at a time (the term tokens
//! of their writes never interleave), a SIGKILLed leader is replaced within its lease + 1 s,
//! a resignation hands over within 500 ms, and a leader SIGSTOPped past its lease learns
//! it lost when it runs again, its fenced write refused — which the overlap detector sees
//! as an interleaved token (its negative control).

use std::time::Duration;

use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::locks::{client, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use futures_util::StreamExt;
use lock_core::LockClient;
use redis::AsyncCommands;
use tokio::time::Instant;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");
const LEASE: Duration = Duration::from_secs(1);

/// The three campaigners and what they said.
struct Fleet {
    instances: Vec<HolderProcess>,
    locks: LockClient,
    store_url: String,
    name: String,
}

impl Fleet {
    fn start(lock: &RedisServer, store: &RedisServer, name: &str) -> Fleet {
        let instances = (0..3)
            .map(|i| {
                let args = [
                    "elect".to_owned(),
                    lock.url(),
                    store.url(),
                    name.to_owned(),
                    LEASE.as_millis().to_string(),
                    format!("instance-{i}"),
                ];
                HolderProcess::spawn(FLEET, &args)
            })
            .collect();
        Fleet {
            instances,
            locks: client(&lock.url()),
            store_url: store.url(),
            name: name.to_owned(),
        }
    }

    /// The instance that leads now (by the election's own record) and its token.
    async fn leader(&self) -> (usize, u64) {
        let election = self.locks.election(self.name.as_str());
        let deadline = Instant::now() + GENEROUS;
        let leader = loop {
            if let Some(leader) = election.leader().await.unwrap() {
                break leader;
            }
            assert!(Instant::now() < deadline, "nobody leads");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let pid = leader.holder().and_then(|h| h.pid()).expect("recorded pid");
        let i = (self.instances.iter())
            .position(|p| p.pid() == pid)
            .expect("a leader of this fleet");
        (i, leader.fencing_token())
    }

    /// The raw log of the leaders' writes (tokens in write order).
    async fn raw_log(&self) -> Vec<u64> {
        let store = redis::Client::open(self.store_url.as_str()).unwrap();
        let mut conn = store.get_multiplexed_async_connection().await.unwrap();
        conn.lrange(format!("log:{}", self.name), 0, -1)
            .await
            .unwrap()
    }

    /// Waits until the raw log has a write of `token`.
    async fn wait_write(&self, token: u64) {
        wait_until("the leader wrote", GENEROUS, || async {
            self.raw_log().await.contains(&token)
        })
        .await;
    }
}

/// Term tokens interleaved in the raw write log: a write of an older term after one of a
/// newer term (two leaders at once).
fn interleaved(log: &[u64]) -> usize {
    let mut highest = 0;
    log.iter()
        .filter(|&&t| {
            let stale = t < highest;
            highest = highest.max(t);
            stale
        })
        .count()
}

#[test]
fn the_overlap_detector_fires_on_interleaved_terms() {
    assert_eq!(interleaved(&[1, 1, 2, 2, 3]), 0);
    assert_eq!(interleaved(&[1, 2, 1, 3]), 1);
}

/// Kill the leader, then resign the next one: each handover is timely, tokens rise, and
/// the writes of the terms never interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_through_kill_and_resign() {
    let (lock, store) = (RedisServer::start(), RedisServer::start());
    let mut fleet = Fleet::start(&lock, &store, "orders");
    // An observer in this process records every change it sees.
    let mut changes = fleet.locks.election("orders").observe();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let observer = tokio::spawn(async move {
        while let Some(change) = changes.next().await {
            let _ = seen_tx.send(change.map(|leader| leader.fencing_token()));
        }
    });
    let (first, token_1) = fleet.leader().await;
    fleet.instances[first].expect("LEADER", GENEROUS).await;
    fleet.wait_write(token_1).await;

    // SIGKILL: a follower takes over within the lease + 1 s, with a higher token.
    fleet.instances[first].kill().await;
    let killed = Instant::now();
    let followers: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    let (second, token_2) = wait_leader(&mut fleet, &followers).await;
    let after_kill = killed.elapsed();
    assert!(token_2 > token_1);
    assert!(
        after_kill <= LEASE + Duration::from_secs(1),
        "{after_kill:?}"
    );
    fleet.wait_write(token_2).await;

    // Resign: the last one takes over within 500 ms.
    let third = followers.into_iter().find(|&i| i != second).unwrap();
    fleet.instances[second].send("RESIGN").await;
    let resigned = fleet.instances[second].expect("RESIGNED", GENEROUS).await;
    let resigned_at = Instant::now();
    assert_eq!(fields(&resigned)["ok"], "1");
    let taken = fleet.instances[third].expect("LEADER", GENEROUS).await;
    let after_resign = resigned_at.elapsed();
    let token_3: u64 = fields(&taken)["token"].parse().unwrap();
    assert!(token_3 > token_2);
    assert!(
        after_resign <= Duration::from_millis(500),
        "{after_resign:?}"
    );
    fleet.wait_write(token_3).await;
    println!(
        "fleet election: new leader {after_kill:?} after SIGKILL (lease {LEASE:?}), \
         {after_resign:?} after resign()"
    );

    let log = fleet.raw_log().await;
    assert_eq!(interleaved(&log), 0, "two leaders wrote at once: {log:?}");

    // observe() saw the three terms, in order (and no other), each once.
    let mut terms = Vec::new();
    while terms.len() < 3 {
        let change = tokio::time::timeout(GENEROUS, seen.recv()).await;
        // A term is seen again when its leader proclaims a value: count each term once.
        if let Some(token) = change.expect("a change").expect("observing") {
            if terms.last() != Some(&token) {
                terms.push(token);
            }
        }
    }
    observer.abort();
    assert_eq!(terms, [token_1, token_2, token_3]);
    for instance in fleet.instances.drain(..) {
        drop(instance.into_lines(GENEROUS).await);
    }
    // Every key of the election has a TTL (the killed leaders' terms end with it).
    crate::every_key_expires(&lock, None).await;
}

/// The next LEADER line among `candidates`, and who said it.
async fn wait_leader(fleet: &mut Fleet, candidates: &[usize]) -> (usize, u64) {
    // The dead or paused leader's record lasts until its lease ends.
    let deadline = Instant::now() + GENEROUS;
    let (i, token) = loop {
        let (i, token) = fleet.leader().await;
        if candidates.contains(&i) {
            break (i, token);
        }
        assert!(Instant::now() < deadline, "no follower leads");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let line = fleet.instances[i].expect("LEADER", GENEROUS).await;
    assert_eq!(fields(&line)["token"].parse::<u64>().unwrap(), token);
    (i, token)
}

/// SIGSTOP the leader past its lease: another takes over; after SIGCONT the paused one
/// reports LOST, and its write with the old token is refused by the fenced store — while the
/// raw log (no fencing) shows the interleaving that fencing prevents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_learns_it_lost_and_is_fenced_off() {
    let (lock, store) = (RedisServer::start(), RedisServer::start());
    let mut fleet = Fleet::start(&lock, &store, "partition_7");
    let (paused, token_1) = fleet.leader().await;
    fleet.instances[paused].expect("LEADER", GENEROUS).await;
    fleet.wait_write(token_1).await;
    fleet.instances[paused].stop();
    let others: Vec<usize> = (0..3).filter(|&i| i != paused).collect();
    let (_, token_2) = wait_leader(&mut fleet, &others).await;
    assert!(token_2 > token_1);
    fleet.wait_write(token_2).await;
    fleet.instances[paused].cont();
    let lost = fleet.instances[paused].expect("LOST", GENEROUS).await;
    assert_eq!(fields(&lost)["token"].parse::<u64>().unwrap(), token_1);
    assert_eq!(
        fields(&lost)["write"],
        "rejected",
        "a stale leader's write was accepted"
    );
    let log = fleet.raw_log().await;
    assert!(
        interleaved(&log) >= 1,
        "the detector missed the paused leader's late write: {log:?}"
    );
    for instance in fleet.instances.drain(..) {
        drop(instance.into_lines(GENEROUS).await);
    }
}
