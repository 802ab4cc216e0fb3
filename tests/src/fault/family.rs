//! The one exclusion harness of the lock family's cross-process tests: `processes` child
//! holders (the `holder` binary's `family` mode) take holds of one name while a detector
//! script on a second Redis counts who is inside; their reports summed.

use std::time::Duration;

use super::holder::{fields, HolderProcess};
use crate::server::RedisServer;

/// What the holders reported, summed over the processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FamilyRun {
    /// Holds taken.
    pub entries: u64,
    /// Holds that entered beside a hold they must exclude (a writer beside anyone, more
    /// permits than the semaphore has).
    pub violations: u64,
    /// Most holders inside at once.
    pub max_inside: u64,
    /// Write holds among the entries.
    pub writes: u64,
}

/// Runs `processes` holders of `name`, each with `tasks` tasks taking `count` holds of
/// `mode` (`rw`: one in five writes; `sem:<n>`: permits of a semaphore of n), process `i`
/// on `servers[i % len]` (one server: one lock; several: the detector's negative control),
/// checked by the detector on `detector`; waits (bounded) for every report.
pub async fn run_family(
    holder_bin: &str,
    (servers, detector): (&[&RedisServer], &RedisServer),
    name: &str,
    mode: &str,
    (processes, tasks, count): (usize, u32, u32),
) -> FamilyRun {
    let mut holders = Vec::new();
    for i in 0..processes {
        let args = [
            "family",
            &servers[i % servers.len()].url(),
            &detector.url(),
            name,
            "5000",
            mode,
            &tasks.to_string(),
            &count.to_string(),
        ]
        .map(String::from);
        holders.push(HolderProcess::spawn(holder_bin, &args));
    }
    let mut run = FamilyRun::default();
    for mut holder in holders {
        let done = holder.expect("DONE", Duration::from_secs(300)).await;
        let f = fields(&done);
        let n = |k: &str| f[k].parse::<u64>().expect("a number");
        run.entries += n("entries");
        run.violations += n("violations");
        run.max_inside = run.max_inside.max(n("max_inside"));
        run.writes += n("writes");
    }
    run
}
