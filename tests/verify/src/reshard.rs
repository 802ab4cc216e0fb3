//! The `reshard` fault (Cluster): the slot of a name the workload is using moves to another
//! master as `redis-cli --cluster reshard` moves it, paced so that clients meet it
//! mid-migration (`ASK`, `TRYAGAIN`); half the time it moves back after a while.

use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::reshard::{keyslot, owner, Migration};
use distlock_tests::fault::rng::Rng;
use distlock_tests::RedisCluster;
use lock_core::LockClientBuilder;
use tokio::time::sleep;

use crate::election::ELECTIONS;
use crate::workload::{EXCLUSIVE, READ_WRITE, SEMAPHORE};
use crate::{idempotency, jobs};

/// At most this many `MIGRATE` steps per move (a name's slot holds a handful of keys).
const MAX_STEPS: usize = 64;
/// Attempts of one step before the move is given up.
const ATTEMPTS: usize = 3;

/// Moves the slot of one name in use to another master, and half the time back.
pub(crate) async fn apply(cluster: &RedisCluster, rng: &mut Rng) {
    if let Err(e) = reshard(cluster, rng).await {
        eprintln!("verify: reshard: {e}");
    }
}

async fn reshard(cluster: &RedisCluster, rng: &mut Rng) -> Result<(), String> {
    let names = names_in_use();
    let name = &names[rng.index(names.len())];
    // Every key of a lock is its lock key or carries it as its hash tag; the workload's
    // names have no byte the library escapes.
    let key = format!("{}{name}", LockClientBuilder::DEFAULT_KEY_PREFIX);
    let masters = cluster.master_indices();
    let first = masters.first().ok_or("no running master")?;
    let slot = keyslot(&cluster.nodes()[*first], key.as_bytes()).await?;
    let source = owner(cluster, slot).await?;
    let others: Vec<usize> = masters.into_iter().filter(|&m| m != source).collect();
    if others.is_empty() {
        return Err("no other master".into());
    }
    let target = others[rng.index(others.len())];
    move_slot(cluster, slot, target, rng).await?;
    if rng.below(0..2) == 0 {
        sleep(rng.millis(Duration::from_millis(200), Duration::from_secs(4))).await;
        move_slot(cluster, slot, source, rng).await?;
    }
    Ok(())
}

/// One move, paced: a pause with the slot marked but no key moved (clients are sent on
/// with `ASK`), then batches of 1–4 keys (a name's keys split between the nodes: `TRYAGAIN`)
/// with pauses between them.
async fn move_slot(
    cluster: &RedisCluster,
    slot: u16,
    target: usize,
    rng: &mut Rng,
) -> Result<(), String> {
    let mut migration = Migration::begin(cluster, slot, target).await?;
    sleep(rng.millis(Duration::ZERO, Duration::from_millis(600))).await;
    for _ in 0..MAX_STEPS {
        let batch = 1 + rng.index(4);
        if step(&mut migration, batch).await? == 0 {
            return migration.finish(cluster).await;
        }
        sleep(rng.millis(Duration::ZERO, Duration::from_millis(400))).await;
    }
    Err(format!("slot {slot}: keys left after {MAX_STEPS} steps"))
}

async fn step(migration: &mut Migration, batch: usize) -> Result<usize, String> {
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        match migration.step(batch).await {
            Ok(moved) => return Ok(moved),
            Err(e) => last = e,
        }
        sleep(Duration::from_millis(200)).await;
    }
    Err(format!("slot {}: {last}", migration.slot))
}

/// The names the clients are using now: the locks, the elections, the next job fires and
/// this epoch's idempotency keys.
fn names_in_use() -> Vec<String> {
    let now = monotonic_ns();
    let fire = now / jobs::SLOT.as_nanos() as u64;
    let epoch = now / idempotency::EPOCH.as_nanos() as u64;
    let fixed = EXCLUSIVE
        .iter()
        .chain(&READ_WRITE)
        .chain(&[SEMAPHORE.0])
        .chain(&ELECTIONS)
        .map(|n| (*n).to_owned());
    let timed = (1..=2)
        .map(|i| jobs::fire_name(fire + i))
        .chain((0..idempotency::KEYS).map(|k| idempotency::key_name(epoch, k)));
    fixed.chain(timed).collect()
}
