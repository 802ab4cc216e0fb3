//! D: many locks held under each library's renewal mechanism; renewal commands per tick.

use std::time::{Duration, Instant};

use std::future::IntoFuture;

use futures_util::stream::{self, StreamExt};

use crate::peers::{Lib, Peer};
use crate::scenarios::{Metrics, Sizes};
use crate::server::{Admin, CmdStats};

/// Watches Redis for `window`, sampling every 20 ms: answers the counts and the number of
/// renewal bursts (a sample with new Lua calls — FCALL or EVALSHA — after a quiet one).
async fn observe(admin: &Admin, window: Duration) -> (CmdStats, f64) {
    let end = Instant::now() + window;
    let (mut last, mut busy, mut bursts) = (0, false, 0.0);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (n, _) = admin.commandstats().await.lua();
        if n > last && !busy {
            bursts += 1.0;
        }
        busy = n > last;
        last = n;
    }
    (admin.commandstats().await, bursts)
}

struct Observed {
    stats: CmdStats,
    bursts: f64,
    ticks: f64,
    flights_per_tick: f64,
    held: f64,
    secs: f64,
}

fn per_tick(o: &Observed) -> Metrics {
    let (stats, ticks) = (&o.stats, o.ticks);
    // distlock's FCALL of `renew`, the peers' EVALSHA of their extend scripts.
    let lua = stats.lua().0 as f64;
    vec![
        ("ticks", ticks),
        ("bursts seen", o.bursts),
        ("Lua calls/s", lua / o.secs),
        ("Lua calls/tick", lua / ticks),
        ("flights/tick", o.flights_per_tick),
        ("all cmds/tick", stats.total() as f64 / ticks),
        ("held at end", o.held),
    ]
}

/// Holds `d_locks` locks for `d_secs` with a `d_lease` lease kept alive by the library.
/// Only for libraries that can keep a lock alive (see [`Lib::not_in`]).
pub async fn watchdog(lib: Lib, url: &str, admin: &Admin, s: &Sizes, run: usize) -> Metrics {
    admin.reset().await;
    let names: Vec<String> = (0..s.d_locks).map(|i| format!("d{run}:{i}")).collect();
    let window = Duration::from_secs_f64(s.d_secs);
    match lib {
        Lib::RedisLock | Lib::RedissonLua => {
            panic!("{} keeps no lock alive: Lib::not_in('D')", lib.name())
        }
        Lib::Distlock => {
            // Watchdog interval = lease / 3.
            let client = lock_core::LockClient::builder(url)
                .lease(s.d_lease)
                .build()
                .expect("client");
            let guards: Vec<_> = stream::iter(&names)
                .map(|n| client.lock(n.as_str()).into_future())
                .buffer_unordered(256)
                .collect()
                .await;
            let guards: Vec<_> = guards.into_iter().map(|g| g.expect("lock")).collect();
            assert_eq!(client.renewing(), s.d_locks);
            admin.reset_stats().await;
            let (stats, bursts) = observe(admin, window).await;
            let held = guards.iter().filter(|g| g.is_held()).count() as f64;
            // One tick = one burst of ⌈locks/512⌉ batch renewals sent together.
            let out = per_tick(&Observed {
                stats,
                bursts,
                ticks: bursts,
                flights_per_tick: 1.0,
                held,
                secs: window.as_secs_f64(),
            });
            stream::iter(guards)
                .for_each_concurrent(256, |g| async move {
                    let _ = g.release().await;
                })
                .await;
            out
        }
        Lib::Baseline => {
            // A hand-written watchdog: every lease/3, one pipeline of one EVALSHA per lock.
            let Peer::Baseline(b) = Peer::new(lib, url).await.expect("peer") else {
                unreachable!()
            };
            let mut held = Vec::with_capacity(names.len());
            for n in &names {
                let token = b.try_lock(n, s.d_lease).await.expect("set").expect("free");
                held.push((n.clone(), token));
            }
            admin.reset_stats().await;
            let observer = observe(admin, window);
            let started = Instant::now();
            let mut interval = tokio::time::interval(s.d_lease / 3);
            interval.tick().await;
            let renewer = async {
                let (mut ticks, mut alive) = (0.0, 0);
                loop {
                    interval.tick().await;
                    if started.elapsed() > window {
                        return (ticks, alive);
                    }
                    alive = b.extend_all(&held, s.d_lease).await;
                    ticks += 1.0;
                }
            };
            let ((stats, bursts), (ticks, alive)) = tokio::join!(observer, renewer);
            per_tick(&Observed {
                stats,
                bursts,
                ticks,
                flights_per_tick: 1.0,
                held: alive as f64,
                secs: window.as_secs_f64(),
            })
        }
        Lib::Rslock => {
            // rslock's own keep-alive: `using` renews each lock on its own timer.
            let manager = rslock::LockManager::new(vec![url.to_owned()]);
            let hold = window + Duration::from_secs(5);
            let tasks: Vec<_> = names
                .iter()
                .map(|n| {
                    let (m, n, lease) = (manager.clone(), n.clone(), s.d_lease);
                    tokio::spawn(async move {
                        m.using(n.as_bytes(), lease, async || tokio::time::sleep(hold).await)
                            .await
                    })
                })
                .collect();
            let deadline = Instant::now() + Duration::from_secs(5);
            while admin.dbsize().await < s.d_locks as u64 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            admin.reset_stats().await;
            let (stats, bursts) = observe(admin, window).await;
            let held = admin.dbsize().await as f64;
            // Each lock renews when its validity (lease − drift) is 500 ms from running out.
            let period = s.d_lease.as_secs_f64() * 0.99 - 0.502;
            let ticks = window.as_secs_f64() / period;
            // Every lock is renewed by its own timer, in its own round trip.
            let out = per_tick(&Observed {
                stats,
                bursts,
                ticks,
                flights_per_tick: s.d_locks as f64,
                held,
                secs: window.as_secs_f64(),
            });
            for t in &tasks {
                t.abort();
            }
            out
        }
    }
}
