//! Three instances fire the same job every 500 ms with clocks skewed by up to 200 ms:
//! with `hold_at_least` each fire runs exactly once across them; without it, the same run
//! shows the duplicates it prevents (the test's negative control).

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
    let (mut ran, mut late_ms) = (HashMap::<&str, u64>::new(), 0);
    for (name, mut instance) in instances {
        let done = instance.expect("DONE", run_time).await;
        *ran.entry(name).or_default() += fields(&done)["ran"].parse::<u64>().unwrap();
        late_ms = late_ms.max(fields(&done)["late_ms"].parse::<u64>().unwrap());
    }
    let mut counts = store
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let held: HashMap<u64, u64> = counts.hgetall("fires:report_held").await.unwrap();
    let bare: HashMap<u64, u64> = counts.hgetall("fires:report_bare").await.unwrap();

    let mut not_once = Vec::new();
    for k in (0..FIRES).filter(|k| held.get(k).copied().unwrap_or(0) != 1) {
        // When each run started, in ms after the fire was due on the true clock.
        let starts: Vec<u64> = counts
            .lrange(format!("starts:report_held:{k}"), 0, -1)
            .await
            .unwrap();
        let due = start_ns + k * u64::try_from(PERIOD.as_nanos()).unwrap();
        let ms: Vec<i64> = starts
            .iter()
            .map(|&s| (s as i64 - due as i64) / 1_000_000)
            .collect();
        not_once.push((k, ms));
    }
    let duplicated = (0..FIRES)
        .filter(|k| bare.get(k).copied().unwrap_or(0) > 1)
        .count();
    let extra_runs: u64 = bare.values().map(|n| n - 1).sum();
    println!(
        "fleet skew: with hold_at_least {HOLD_AT_LEAST:?}: {} of {FIRES} fires ran exactly once; \
         without: {duplicated} of {FIRES} fires ran more than once ({extra_runs} extra runs); \
         largest scheduling delay of a fire {late_ms} ms",
        FIRES as usize - not_once.len()
    );
    assert!(
        not_once.is_empty(),
        "fires not run exactly once (fire, ms after due of each run's start; a run after \
         due + 150 ms means an instance was scheduled that late): {not_once:?}"
    );
    assert_eq!(ran["report_held"], FIRES);
    // The negative control: a skew of 200 ms and a 1 ms job run most fires more than once.
    assert!(
        duplicated >= FIRES as usize / 2,
        "without hold_at_least only {duplicated} of {FIRES} fires were duplicated"
    );

    // The lingering hold has a TTL of at most hold_at_least, and nothing else is left.
    let most = i64::try_from(HOLD_AT_LEAST.as_millis()).unwrap();
    crate::every_key_expires(&server, Some(most)).await;
}
