//! Three instances fire the same job every 500 ms with clocks skewed by up to 200 ms:
//! with `hold_at_least` each fire runs exactly once across them; without it, the same run
//! shows the duplicates it prevents (the test's negative control). A fire during which the
//! machine stalled an instance past the margins is reported and left out: then no lock
//! could tell a late fire from the next one.

use std::collections::HashMap;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::locks::GENEROUS;
use distlock_tests::RedisServer;
use redis::AsyncCommands;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");
const PERIOD: Duration = Duration::from_millis(500);
const FIRES: u64 = 60;
/// Each instance's clock runs this far ahead (200 ms between the extremes).
const OFFSETS_MS: [u64; 3] = [0, 100, 200];
/// Between the 200 ms skew and the 500 ms period, with 150 ms of scheduling delay to spare
/// on each side: a fire that started first at due − 200 ms holds until due + 150 ms, past
/// the last instance's fire (due + 0), and ends before the next fire's first (due + 300).
const HOLD_AT_LEAST: Duration = Duration::from_millis(350);
const HOLD_AT_MOST: Duration = Duration::from_secs(5);
/// An attempt that ended later than this after it was due was stalled (a loaded machine):
/// below it, the 150 ms margins above decide the outcome; above it, a stall does.
const ON_TIME_MS: u64 = 100;

/// The fires whose attempts, and those of the fire before (whose hold reaches into it), all
/// ended within [`ON_TIME_MS`] of their due time: for them the outcome is the lock's doing,
/// not a stalled process's.
fn on_time(delays: &[u64]) -> Vec<u64> {
    (0..delays.len())
        .filter(|&k| delays[k] < ON_TIME_MS && (k == 0 || delays[k - 1] < ON_TIME_MS))
        .map(|k| k as u64)
        .collect()
}

#[test]
fn fires_after_a_stall_are_not_on_time() {
    assert_eq!(on_time(&[5, 150, 5, 5]), [0, 3]);
}

/// Both runs at once (own names, own counts), so the suite pays the 30 s once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_fires_run_once_with_hold_at_least_and_twice_without() {
    let (server, store) = (RedisServer::start(), RedisServer::start());
    // Far enough ahead that every instance is up before the first fire.
    let start_ns = monotonic_ns() + 2_000_000_000;
    let mut instances = Vec::new();
    for (name, least) in [
        ("report_held", HOLD_AT_LEAST),
        ("report_bare", Duration::ZERO),
    ] {
        for offset in OFFSETS_MS {
            let args = [
                "job".to_owned(),
                server.url(),
                store.url(),
                name.to_owned(),
                start_ns.to_string(),
                PERIOD.as_millis().to_string(),
                FIRES.to_string(),
                offset.to_string(),
                least.as_millis().to_string(),
                HOLD_AT_MOST.as_millis().to_string(),
            ];
            instances.push((name, HolderProcess::spawn(FLEET, &args)));
        }
    }
    let run_time = PERIOD * u32::try_from(FIRES).unwrap() + GENEROUS * 3;
    // Per job: the latest any instance ended its attempt at each fire, after it was due.
    let mut delays = HashMap::<&str, Vec<u64>>::new();
    for (name, mut instance) in instances {
        let delays = delays
            .entry(name)
            .or_insert_with(|| vec![0; FIRES as usize]);
        for _ in 0..FIRES {
            let fire = instance.expect("FIRE", run_time).await;
            let f = fields(&fire);
            let k: usize = f["k"].parse().unwrap();
            delays[k] = delays[k].max(f["delay_ms"].parse().unwrap());
        }
        instance.expect("DONE", GENEROUS).await;
    }
    let mut counts = store
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut runs = HashMap::<&str, HashMap<u64, u64>>::new();
    for name in ["report_held", "report_bare"] {
        runs.insert(name, counts.hgetall(format!("fires:{name}")).await.unwrap());
    }
    let runs_of = |name: &str, k: u64| runs[name].get(&k).copied().unwrap_or(0);
    let clean = |name: &str| on_time(&delays[name]);

    let held = clean("report_held");
    let not_once: Vec<_> = (held.iter())
        .filter(|&&k| runs_of("report_held", k) != 1)
        .map(|&k| (k, runs_of("report_held", k)))
        .collect();
    let bare = clean("report_bare");
    let duplicated = bare
        .iter()
        .filter(|&&k| runs_of("report_bare", k) > 1)
        .count();
    let extra_runs: u64 = runs["report_bare"].values().map(|n| n - 1).sum();
    println!(
        "fleet skew: with hold_at_least {HOLD_AT_LEAST:?}: {} of {} fires on time ran exactly \
         once ({FIRES} fires); without: {duplicated} of {} fires on time ran more than once \
         ({extra_runs} extra runs in all); largest lateness of an attempt {} ms",
        held.len() - not_once.len(),
        held.len(),
        bare.len(),
        delays.values().flatten().max().unwrap()
    );
    assert!(
        not_once.is_empty(),
        "fires on time not run exactly once (fire, runs): {not_once:?}"
    );
    // The negative control: a skew of 200 ms and a 1 ms job run most fires more than once.
    assert!(
        duplicated >= bare.len() / 2,
        "without hold_at_least only {duplicated} of {} fires were duplicated",
        bare.len()
    );
    assert!(
        held.len() >= FIRES as usize / 2 && bare.len() >= FIRES as usize / 2,
        "the machine stalled the instances past {ON_TIME_MS} ms on most fires: {} and {} of \
         {FIRES} fires on time",
        held.len(),
        bare.len()
    );

    // The lingering hold has a TTL of at most hold_at_least, and nothing else is left.
    let most = i64::try_from(HOLD_AT_LEAST.as_millis()).unwrap();
    crate::every_key_expires(&server, Some(most)).await;
}
