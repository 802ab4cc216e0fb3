//! One process of the scaling bench (`bench_scaling --child …`): contenders on one name, or
//! one holder of many names, for one library or kind of hold. It talks to the parent by
//! lines: `READY <rss kB>` once connected, then it waits for `go` on stdin; contenders end
//! with `DONE <in window> <total> <least per task> <most per task> <rss kB mid-window>`;
//! a holder prints `HELD <rss kB> <acquire s>`, waits for `release`, ends with
//! `DONE <release s>`.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lock_core::{LockClient, LockGuard};
use redis::aio::MultiplexedConnection;
use redis::Script;
use tokio::sync::{Notify, Semaphore};

/// The lease of every hold (long: nothing here should expire).
const LEASE_MS: u64 = 30_000;
/// The baseline polls a busy lock this often (as in the peer bench).
const BASELINE_POLL: Duration = Duration::from_millis(1);
/// A waiter gives up after this (a stuck point shows up as an error, not a hang).
const WAIT_CAP: Duration = Duration::from_secs(60);
/// Compare-and-delete, the baseline's release.
const UNLOCK: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// Who takes the locks: a kind of distlock hold, or a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    Lock,
    Write,
    Read,
    Semaphore,
    Baseline,
    Redisson,
}

impl Lib {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "lock" => Self::Lock,
            "write" => Self::Write,
            "read" => Self::Read,
            "sem" => Self::Semaphore,
            "baseline" => Self::Baseline,
            "redisson" => Self::Redisson,
            _ => return None,
        })
    }

    pub fn code(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Write => "write",
            Self::Read => "read",
            Self::Semaphore => "sem",
            Self::Baseline => "baseline",
            Self::Redisson => "redisson",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Lock => "distlock lock",
            Self::Write => "distlock write_lock",
            Self::Read => "distlock read_lock",
            Self::Semaphore => "distlock semaphore(1)",
            Self::Baseline => "SET NX PX, 1 ms poll",
            Self::Redisson => "Redisson's scripts + pub/sub retry",
        }
    }
}

/// A library's client in this process.
#[derive(Clone)]
enum Taker {
    Distlock(LockClient, Lib),
    Baseline(MultiplexedConnection, Arc<Script>),
    Redisson(Redisson),
}

/// A hold of any library.
enum Hold {
    Distlock(LockGuard),
    Baseline(String, String),
    Redisson(String, String),
}

/// Redisson 3.27's lock and unlock scripts, and its waiting: on a busy answer, wait for a
/// message on the lock's channel (one subscription per process, as Redisson shares it) or
/// the holder's TTL, then try again — every waiter wakes on every release.
#[derive(Clone)]
struct Redisson {
    conn: MultiplexedConnection,
    lock: Arc<Script>,
    unlock: Arc<Script>,
    released: Arc<Notify>,
}

impl Taker {
    async fn new(lib: Lib, url: &str, contended_name: Option<&str>) -> Self {
        let client = redis::Client::open(url).expect("url");
        match lib {
            Lib::Baseline | Lib::Redisson => {
                let conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect");
                if lib == Lib::Baseline {
                    return Self::Baseline(conn, Arc::new(Script::new(UNLOCK)));
                }
                let released = Arc::new(Notify::new());
                if let Some(name) = contended_name {
                    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
                    pubsub
                        .subscribe(format!("redisson_lock__channel:{{{name}}}"))
                        .await
                        .expect("subscribe");
                    let released = released.clone();
                    tokio::spawn(async move {
                        let mut messages = pubsub.into_on_message();
                        while messages.next().await.is_some() {
                            released.notify_waiters();
                        }
                    });
                }
                Self::Redisson(Redisson {
                    conn,
                    lock: Arc::new(Script::new(distlock_examples::redisson_scripts::LOCK)),
                    unlock: Arc::new(Script::new(distlock_examples::redisson_scripts::UNLOCK)),
                    released,
                })
            }
            kind => Self::Distlock(
                LockClient::builder(url)
                    .command_timeout(Duration::from_secs(30))
                    .build()
                    .expect("client"),
                kind,
            ),
        }
    }

    /// Takes `name` as `owner`, waiting with the library's own strategy.
    async fn take(&self, name: &str, owner: &str) -> Hold {
        match self {
            Self::Distlock(client, kind) => {
                let request = match kind {
                    Lib::Write => client.write_lock(name),
                    Lib::Read => client.read_lock(name),
                    Lib::Semaphore => client.semaphore(name, 1),
                    _ => client.lock(name),
                };
                Hold::Distlock(request.wait(WAIT_CAP).await.expect("acquire"))
            }
            Self::Baseline(conn, _) => loop {
                let ok: Option<String> = redis::cmd("SET")
                    .arg(name)
                    .arg(owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(LEASE_MS)
                    .query_async(&mut conn.clone())
                    .await
                    .expect("SET");
                if ok.is_some() {
                    return Hold::Baseline(name.to_owned(), owner.to_owned());
                }
                tokio::time::sleep(BASELINE_POLL).await;
            },
            Self::Redisson(r) => loop {
                // Listening before trying: a release between the answer and the wait is seen.
                let released = r.released.notified();
                tokio::pin!(released);
                released.as_mut().enable();
                let busy: Option<i64> = r
                    .lock
                    .key(name)
                    .arg(LEASE_MS)
                    .arg(owner)
                    .invoke_async(&mut r.conn.clone())
                    .await
                    .expect("redisson lock");
                let Some(ttl) = busy else {
                    return Hold::Redisson(name.to_owned(), owner.to_owned());
                };
                let ttl = Duration::from_millis(ttl.max(1).unsigned_abs());
                tokio::select! {
                    () = released => {}
                    () = tokio::time::sleep(ttl) => {}
                }
            },
        }
    }

    async fn give_back(&self, hold: Hold) {
        match (self, hold) {
            (_, Hold::Distlock(guard)) => guard.release().await.expect("release"),
            (Self::Baseline(conn, unlock), Hold::Baseline(key, owner)) => {
                let _: i64 = unlock
                    .key(key)
                    .arg(owner)
                    .invoke_async(&mut conn.clone())
                    .await
                    .expect("unlock");
            }
            (Self::Redisson(r), Hold::Redisson(name, owner)) => {
                let _: Option<i64> = r
                    .unlock
                    .key(&name)
                    .key(format!("redisson_lock__channel:{{{name}}}"))
                    .key(distlock_examples::redisson_scripts::unlock_latch(
                        &name, &owner,
                    ))
                    .arg(0)
                    .arg(LEASE_MS)
                    .arg(&owner)
                    .arg("PUBLISH")
                    .arg(13_500)
                    .invoke_async(&mut r.conn.clone())
                    .await
                    .expect("redisson unlock");
            }
            _ => unreachable!("a hold of another library"),
        }
    }
}

/// Resident memory of this process, in kB.
pub fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).ok();
}

/// Blocks until the parent writes `word` on stdin (a closed stdin also ends the wait).
async fn wait_for(word: &'static str) {
    tokio::task::spawn_blocking(move || {
        for line in std::io::stdin().lock().lines() {
            if line.map_or(true, |l| l.trim() == word) {
                return;
            }
        }
    })
    .await
    .ok();
}

/// `tasks` contenders on `name` for `secs`, then until each has its last turn.
pub async fn contend(lib: Lib, url: &str, name: &str, tasks: usize, secs: f64, id: &str) {
    let taker = Taker::new(lib, url, Some(name)).await;
    say(&format!("READY {}", rss_kb()));
    wait_for("go").await;
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let in_window = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let (taker, in_window) = (taker.clone(), in_window.clone());
        let (name, owner) = (name.to_owned(), format!("{id}-{t}"));
        handles.push(tokio::spawn(async move {
            let mut mine = 0u64;
            while Instant::now() < until {
                let hold = taker.take(&name, &owner).await;
                if Instant::now() < until {
                    in_window.fetch_add(1, Ordering::Relaxed);
                }
                mine += 1;
                taker.give_back(hold).await;
            }
            mine
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs / 2.0)).await;
    let rss_mid = rss_kb();
    let mut counts = Vec::with_capacity(tasks);
    for handle in handles {
        counts.push(handle.await.expect("task"));
    }
    let total: u64 = counts.iter().sum();
    let (least, most) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    let window = in_window.load(Ordering::Relaxed);
    say(&format!("DONE {window} {total} {least} {most} {rss_mid}"));
}

/// Takes `names` names at once (256 in flight), holds them until told, gives them back.
pub async fn hold(lib: Lib, url: &str, names: usize, id: &str) {
    let taker = Taker::new(lib, url, None).await;
    say(&format!("READY {}", rss_kb()));
    wait_for("go").await;
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(256));
    let mut handles = Vec::with_capacity(names);
    for i in 0..names {
        let (taker, gate) = (taker.clone(), gate.clone());
        let owner = format!("{id}-{i}");
        handles.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.expect("gate");
            taker.take(&format!("scale-{i}"), &owner).await
        }));
    }
    let mut holds = Vec::with_capacity(names);
    for handle in handles {
        holds.push(handle.await.expect("take"));
    }
    let took = started.elapsed().as_secs_f64();
    say(&format!("HELD {} {took}", rss_kb()));
    wait_for("release").await;
    let started = Instant::now();
    let mut handles = Vec::with_capacity(names);
    for hold in holds {
        let (taker, gate) = (taker.clone(), gate.clone());
        handles.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.expect("gate");
            taker.give_back(hold).await;
        }));
    }
    for handle in handles {
        handle.await.expect("give back");
    }
    say(&format!("DONE {}", started.elapsed().as_secs_f64()));
}
