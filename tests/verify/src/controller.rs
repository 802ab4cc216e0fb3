//! The controller: starts the servers, the resource and the client processes, runs the
//! nemesis, stops everything, and checks the merged history.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use distlock_tests::fault::lock_url;
use distlock_tests::fault::rng::Rng;
use distlock_tests::RedisServer;
use tokio::time::{sleep, Instant};

use crate::args::{Args, Control, Topology};
use crate::check::registers::Dump;
use crate::check::{self, Violation};
use crate::clients::{Clients, Launch};
use crate::dead_grant::DeadGrant;
use crate::history::{self, Event, HistoryWriter};
use crate::nemesis::{self, parse_faults};
use crate::register::Registers;
use crate::report::{self, Report};
use crate::topology::{keys_left, Servers};
use crate::waiter_kill::WaiterKill;
use crate::workload::{register_names, LEASE};
use crate::{guarded, sentinel_watch, topology};

/// Clients keep working this long after the nemesis stops (the liveness window).
const TAIL: Duration = Duration::from_secs(12);
/// Unsafe windows extend this far past their fault: a holder's claim lasts at most a lease
/// after its last renewal, plus room for a loaded machine.
const MARGIN: u64 = 3_000_000_000;

/// Runs one verification; `Ok(true)` when it passed (for a negative control: when the
/// checkers fired).
///
/// # Errors
/// Bad arguments, or a part of the run that could not start.
pub async fn run(args: &Args) -> Result<bool, String> {
    let topology: Topology = args.need("topology")?;
    let secs: u64 = args.need("secs")?;
    let seed: u64 = args.need("seed")?;
    let control: Option<Control> = args.get("control").map(str::parse).transpose()?;
    let default_faults = match control {
        Some(Control::Unfenced) => "client-pause",
        Some(Control::NoLock) => "none",
        Some(Control::DeadGrant) => "waiter-kill",
        None => "all",
    };
    let faults_spec = args.get("faults").unwrap_or(default_faults).to_owned();
    let faults = parse_faults(&faults_spec, topology)?;
    let handoff_bound = args.or("handoff-bound-ms", check::handoff::BOUND / 1_000_000)? * 1_000_000;
    // The clients see only the controls that change what they do.
    let client_control = control.filter(|c| c.in_clients());
    let dir = args.path("out").unwrap_or_else(|| {
        let tag = control.map_or(String::new(), |c| format!("-{c}"));
        std::env::temp_dir().join(format!(
            "distlock-verify-{topology}-{seed}{tag}-{}",
            std::process::id()
        ))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let replay = format!(
        "cargo run -p distlock-verify --release -- --topology {topology} --secs {secs} --seed {seed} --faults {faults_spec}{}",
        control.map_or(String::new(), |c| format!(" --control {c}"))
    ) + &["clients", "tasks", "handoff-bound-ms"]
        .iter()
        .filter_map(|k| Some(format!(" --{k} {}", args.get(k)?)))
        .collect::<String>();
    println!("verify: {replay}\nverify: history in {}", dir.display());

    let handle = tokio::runtime::Handle::current();
    let resource = tokio::task::block_in_place(RedisServer::start);
    let mut servers = tokio::task::block_in_place(|| Servers::start(topology, &handle));
    let history =
        HistoryWriter::create(&dir.join("controller.jsonl"), 0).map_err(|e| e.to_string())?;
    let launch = Launch {
        topology,
        urls: servers.urls(),
        resource: resource.url(),
        dir: dir.clone(),
        seed,
        tasks: args.or("tasks", 4)?,
        control: client_control,
        limit: launch_limit(secs),
    };
    let mut clients = Clients::start(launch, history.clone(), args.or("clients", 3)?)
        .map_err(|e| e.to_string())?;

    let watcher = match &servers {
        Servers::Sentinel(set) => Some(tokio::spawn({
            println!(
                "verify: the sentinels' view in {}",
                dir.join("sentinel-view.jsonl").display()
            );
            let servers = set.servers.iter().map(RedisServer::url).collect();
            let (sentinels, dir, limit) = (set.sentinel_urls(), dir.clone(), launch_limit(secs));
            async move { sentinel_watch::watch(sentinels, servers, &dir, limit).await }
        })),
        _ => None,
    };
    let started = Instant::now();
    let gap = match control {
        Some(Control::Unfenced) => (Duration::from_millis(200), Duration::from_millis(800)),
        _ => (Duration::from_millis(500), Duration::from_millis(3000)),
    };
    let mut rng = Rng::new(seed);
    let until = started + Duration::from_secs(secs);
    let schedule = nemesis::Schedule {
        topology,
        faults,
        gap,
        until,
    };
    let dead_grant = match control {
        Some(Control::DeadGrant) => {
            Some(DeadGrant::start(&dead_grant_word(&servers)?, until).await?)
        }
        _ => None,
    };
    let mut waiter_kill = WaiterKill::new(&dir, dead_grant.clone());
    let mut fault_counts = nemesis::run(
        &schedule,
        &mut rng,
        &mut servers,
        &mut clients,
        &mut waiter_kill,
        &history,
    )
    .await;
    sleep(until.saturating_duration_since(Instant::now())).await;
    if let Servers::Cluster(cluster) = &servers {
        let _ = tokio::task::block_in_place(|| cluster.wait_until_healthy(Duration::from_secs(60)));
    }
    history.log(0, Event::NemesisEnd);
    sleep(TAIL).await;
    if let Some(control) = &dead_grant {
        fault_counts.insert("dead-grant:kept", control.kept());
    }
    let killed_at_stop = clients.stop(Duration::from_secs(30)).await;
    if let Some(watcher) = &watcher {
        watcher.abort();
    }
    // Read (and deleted) before the keys left are counted.
    let writes = guarded::Writes::of(topology, &servers.urls(), client_control);
    let lock_client = topology::client(topology, &servers.urls()).map_err(|e| e.to_string())?;
    let guarded = guarded::dump_all(&writes, &lock_client).await?;
    let keys = wait_keys_gone(&servers).await;

    let mut registers = Registers::connect(&resource.url(), true)
        .await
        .map_err(|e| e.to_string())?;
    let records = history::load(&dir).map_err(|e| e.to_string())?;
    let mut dumps = BTreeMap::new();
    for name in registers_written(&records) {
        let (value, log) = registers.dump(&name).await.map_err(|e| e.to_string())?;
        dumps.insert(name, Dump { value, log });
    }
    let switches = check::switches::read(&dir, MARGIN);
    let report = check_all(&records, &dumps, &guarded, &keys, &switches, handoff_bound);
    let report = Report {
        topology,
        secs,
        seed,
        control,
        faults: fault_counts,
        killed_at_stop,
        elapsed: started.elapsed(),
        ..report
    };
    report::print(&report, &records, &replay, &dir);
    Ok(report.passed())
}

/// Where the `dead-grant` control reads the locks: the server itself (not its proxy), or
/// the Cluster.
fn dead_grant_word(servers: &Servers) -> Result<String, String> {
    match servers {
        Servers::Single { server, .. } => Ok(server.url()),
        Servers::Cluster(cluster) => Ok(lock_url::cluster(&cluster.seed_urls())),
        Servers::Sentinel(_) | Servers::Redlock(_) => {
            Err("the dead-grant control runs on one server or a Cluster".to_owned())
        }
    }
}

/// The longest a run's processes may live: its nemesis, the tail, and room to stop.
fn launch_limit(secs: u64) -> Duration {
    Duration::from_secs(secs) + TAIL + Duration::from_secs(60)
}

/// Waits at least two leases, then up to 15 s, until no lock key is left; returns those left.
async fn wait_keys_gone(servers: &Servers) -> Vec<String> {
    sleep(LEASE * 2).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left: Vec<String> = servers
            .data_servers()
            .into_iter()
            .flat_map(|s| {
                keys_left(s).unwrap_or_else(|e| vec![format!("(node {}: {e})", s.port())])
            })
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        sleep(Duration::from_millis(200)).await;
    }
}

/// The lock registers, and every other register the history shows an access to (jobs,
/// elections, idempotency keys over the core API and over HTTP: their names depend on the
/// run).
fn registers_written(records: &[history::Record]) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = register_names().into_iter().map(String::from).collect();
    names.extend(records.iter().filter_map(|r| match &r.ev {
        Event::Register { name, .. } => Some(name.clone()),
        _ => None,
    }));
    names
}

/// Runs every checker; `guarded` are the guarded registers beside the locks, `switches`
/// adds the Sentinel view's unsafe windows, `handoff_bound` (ns) is the hand-off checker's.
pub fn check_all(
    records: &[history::Record],
    dumps: &BTreeMap<String, Dump>,
    guarded: &BTreeMap<String, Dump>,
    keys: &[String],
    switches: &[check::Window],
    handoff_bound: u64,
) -> Report {
    let mut ix = check::index(records, MARGIN);
    ix.add_split(switches);
    let killed: HashMap<u32, u64> = ix
        .procs
        .iter()
        .filter_map(|(&p, &(_, k))| Some((p, k?)))
        .collect();
    let found = check::registers::check(records, dumps, &killed);
    let mut violations: Vec<Violation> = found.violations;
    violations.extend(check::overlap::exclusion(&ix, records));
    violations.extend(check::overlap::honesty(&ix));
    violations.extend(check::liveness::check(&ix, keys));
    violations.extend(check::leader::check(&ix, records));
    // An operator's force release is unsafe for its own lock name only.
    violations.extend(check::jobs::check(records, &ix.shared_windows));
    violations.extend(check::idempotency::check(
        records,
        dumps,
        &ix.shared_windows,
    ));
    violations.extend(check::http::check(records, dumps, &ix));
    violations.extend(check::guarded::check(records, guarded, &ix.shared_windows));
    let (handoff, handoff_stats) = check::handoff::check(records, &ix, handoff_bound, MARGIN);
    violations.extend(handoff);
    Report {
        ops: report::op_counts(&ix),
        http: report::http_counts(records),
        linearizability_checked: found.checked,
        linearizability_unchecked: found.unchecked,
        unsafe_windows: ix.unsafe_windows.len(),
        violations,
        handoff: handoff_stats,
        ..Report::default()
    }
}
