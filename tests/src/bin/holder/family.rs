//! `holder family …`: tasks taking a read-write lock or a semaphore in a loop, checked by a
//! detector on a separate Redis that every process shares.
//!
//! The detector's counters change in one script each, so entering sees every hold that
//! entered before it and has not left: a reader that finds a writer inside, a writer that
//! finds anyone inside, or a permit holder that finds `permits` others inside is a
//! violation.

use std::time::Duration;

use lock_core::LockClient;
use redis::Script;

/// Enters (ARGV[1] = 1) or leaves (-1) as a reader (`r`), writer (`w`) or permit holder
/// (`p`, ARGV[3] = permits); answers {violation 0/1, holders of that kind now inside}.
const DETECT: &str = r"
local key = KEYS[1] .. ':' .. ARGV[2]
local n = redis.call('incrby', key, ARGV[1])
if tonumber(ARGV[1]) < 0 then return {0, n} end
local bad = 0
if ARGV[2] == 'r' and tonumber(redis.call('get', KEYS[1] .. ':w') or '0') > 0 then bad = 1 end
if ARGV[2] == 'w' and (n > 1 or tonumber(redis.call('get', KEYS[1] .. ':r') or '0') > 0) then bad = 1 end
if ARGV[2] == 'p' and n > tonumber(ARGV[3]) then bad = 1 end
return {bad, n}
";

/// `holder family <lock url> <detector url> <name> <lease ms> <rw|sem:N> <tasks> <count>`:
/// `<tasks>` tasks each take `<count>` holds (rw: 1 in 5 writes), and it prints
/// `DONE entries=… violations=… max_inside=… writes=…`.
pub async fn run(args: &[String], lease: Duration) {
    let (lock_url, detector_url, name) = (&args[1], &args[2], args[3].clone());
    let kind = args.get(5).cloned().unwrap_or_default();
    let tasks: u64 = args.get(6).and_then(|a| a.parse().ok()).unwrap_or(8);
    let count: u64 = args.get(7).and_then(|a| a.parse().ok()).unwrap_or(100);
    let permits: Option<u32> = kind.strip_prefix("sem:").and_then(|n| n.parse().ok());
    let locks = LockClient::builder(lock_url.as_str())
        .lease(lease)
        .command_timeout(Duration::from_secs(5))
        .build()
        .expect("valid client");
    let detector = redis::Client::open(detector_url.as_str()).expect("detector url");
    let conn = detector
        .get_multiplexed_async_connection()
        .await
        .expect("detector connection");
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (locks, mut conn, name) = (locks.clone(), conn.clone(), name.clone());
        handles.push(tokio::spawn(async move {
            let script = Script::new(DETECT);
            let (mut violations, mut max_inside, mut writes) = (0u64, 0u64, 0u64);
            for i in 0..count {
                let side = match permits {
                    Some(_) => "p",
                    None if (i + t) % 5 == 0 => "w",
                    None => "r",
                };
                let request = match (side, permits) {
                    ("p", Some(n)) => locks.semaphore(name.as_str(), n),
                    ("w", _) => locks.write_lock(name.as_str()),
                    _ => locks.read_lock(name.as_str()),
                };
                let guard = request
                    .wait(Duration::from_secs(120))
                    .await
                    .expect("acquire");
                let permits_arg = permits.unwrap_or(0);
                let (bad, inside): (u64, u64) = script
                    .key(&name)
                    .arg(1)
                    .arg(side)
                    .arg(permits_arg)
                    .invoke_async(&mut conn)
                    .await
                    .expect("detector");
                tokio::task::yield_now().await;
                let _: (u64, u64) = script
                    .key(&name)
                    .arg(-1)
                    .arg(side)
                    .arg(permits_arg)
                    .invoke_async(&mut conn)
                    .await
                    .expect("detector");
                guard.release().await.expect("release");
                violations += bad;
                max_inside = max_inside.max(inside);
                writes += u64::from(side == "w");
            }
            (violations, max_inside, writes)
        }));
    }
    let (mut violations, mut max_inside, mut writes) = (0, 0, 0);
    for handle in handles {
        let (v, m, w) = handle.await.expect("task");
        (violations, max_inside, writes) = (violations + v, max_inside.max(m), writes + w);
    }
    println!(
        "DONE entries={} violations={violations} max_inside={max_inside} writes={writes}",
        tasks * count
    );
}
