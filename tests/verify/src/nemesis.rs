//! The nemesis: faults drawn from a seeded generator, applied one at a time, each healed
//! before the next; every fault's start and end go to the history.

use std::time::Duration;

use distlock_tests::fault::rng::Rng;
use nix::sys::signal::Signal;
use tokio::time::{sleep, Instant};

use crate::args::Topology;
use crate::clients::Clients;
use crate::history::{Event, HistoryWriter};
use crate::reshard;
use crate::topology::Servers;
use crate::waiter_kill::WaiterKill;
use crate::workload::LEASE;

/// A kind of fault, and whether SAFETY.md still promises exclusion without fencing under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP a client past its lease, then SIGCONT (fencing's case: claims stay honest).
    ClientPause,
    /// SIGKILL a client and start another.
    ClientKill,
    /// SIGKILL a client while one of its operations waits for a name, and start another
    /// ([`crate::waiter_kill`]).
    WaiterKill,
    /// SIGSTOP a lock server (a master), then SIGCONT.
    RedisPause,
    /// kill -9 and restart a lock server that keeps its append-only file (single).
    RedisRestartPersistent,
    /// kill -9 and restart a lock server with its data gone.
    RedisRestartEmpty,
    /// The proxy closes every connection (single).
    ProxyCut,
    /// The proxy delays every chunk (single).
    ProxyLatency,
    /// The proxy holds all bytes for a while (single).
    ProxyBlackhole,
    /// A planned failover (`CLUSTER FAILOVER` on a replica; `SENTINEL FAILOVER`).
    Failover,
    /// A master killed, its replica promoted, the old master restarted empty (Cluster).
    MasterKill,
    /// The slot of a name in use moved to another master, key batch by key batch, and
    /// sometimes back (Cluster).
    Reshard,
}

impl Fault {
    /// Every fault, with its command-line name.
    pub const ALL: [(Fault, &'static str); 12] = [
        (Fault::ClientPause, "client-pause"),
        (Fault::ClientKill, "client-kill"),
        (Fault::WaiterKill, "waiter-kill"),
        (Fault::RedisPause, "redis-pause"),
        (Fault::RedisRestartPersistent, "redis-restart-aof"),
        (Fault::RedisRestartEmpty, "redis-restart-empty"),
        (Fault::ProxyCut, "proxy-cut"),
        (Fault::ProxyLatency, "proxy-latency"),
        (Fault::ProxyBlackhole, "proxy-blackhole"),
        (Fault::Failover, "failover"),
        (Fault::MasterKill, "master-kill"),
        (Fault::Reshard, "reshard"),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("?", |(_, n)| n)
    }

    /// The faults `topology` supports.
    pub fn supported(topology: Topology) -> Vec<Fault> {
        use Fault::*;
        let mut faults = vec![ClientPause, ClientKill, WaiterKill, RedisPause];
        faults.extend(match topology {
            Topology::Single => vec![
                RedisRestartPersistent,
                RedisRestartEmpty,
                ProxyCut,
                ProxyLatency,
                ProxyBlackhole,
            ],
            Topology::Cluster => vec![Failover, MasterKill, Reshard],
            Topology::Sentinel => vec![Failover],
            Topology::Redlock => vec![RedisRestartEmpty],
        });
        faults
    }

    /// Whether SAFETY.md withdraws exclusion without fencing during (and a lease after)
    /// this fault: data lost on a restart, an unplanned failover, a Sentinel failover
    /// (asynchronous replication), a Redlock node back empty. Not a reshard: no lock script
    /// runs on a slot mid-migration.
    pub fn unsafe_for_exclusion(self, topology: Topology) -> bool {
        match self {
            Fault::RedisRestartEmpty | Fault::MasterKill => true,
            Fault::Failover => topology == Topology::Sentinel,
            // A Sentinel master frozen past down-after is failed over.
            Fault::RedisPause => topology == Topology::Sentinel,
            _ => false,
        }
    }
}

impl Fault {
    /// Whether two masters may grant the same lock during (and shortly after) this fault:
    /// a Sentinel failover leaves the old master writable until the Sentinels demote it,
    /// and a client follows the new one within about a second (SAFETY.md).
    pub fn split_brain(self, topology: Topology) -> bool {
        topology == Topology::Sentinel && matches!(self, Fault::Failover | Fault::RedisPause)
    }
}

/// Parses `--faults`: `all`, `none`, or a comma list of names.
///
/// # Errors
/// On an unknown name or one the topology does not support.
pub fn parse_faults(spec: &str, topology: Topology) -> Result<Vec<Fault>, String> {
    let supported = Fault::supported(topology);
    match spec {
        "all" => return Ok(supported),
        "none" => return Ok(vec![]),
        _ => {}
    }
    spec.split(',')
        .map(|name| {
            let fault = Fault::ALL
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(f, _)| *f)
                .ok_or_else(|| format!("unknown fault {name:?}"))?;
            if supported.contains(&fault) {
                Ok(fault)
            } else {
                Err(format!("{name} is not a fault of {topology}"))
            }
        })
        .collect()
}

/// Faults injected, by kind.
pub type Counts = std::collections::BTreeMap<&'static str, u64>;

/// What the nemesis may do.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The topology.
    pub topology: Topology,
    /// The faults to draw from.
    pub faults: Vec<Fault>,
    /// The range of the gap before each fault.
    pub gap: (Duration, Duration),
    /// When to stop.
    pub until: Instant,
}

/// Runs faults drawn with `rng` from `schedule`, each after a random gap, each healed
/// before the next.
pub async fn run(
    schedule: &Schedule,
    rng: &mut Rng,
    servers: &mut Servers,
    clients: &mut Clients,
    waiter_kill: &mut WaiterKill,
    history: &HistoryWriter,
) -> Counts {
    let Schedule {
        topology,
        ref faults,
        gap,
        until,
    } = *schedule;
    let mut counts = Counts::new();
    // Bounded in count as well as time: at most one fault per 100 ms.
    for _ in 0..until.saturating_duration_since(Instant::now()).as_millis() / 100 + 1 {
        sleep(rng.millis(gap.0, gap.1)).await;
        if faults.is_empty() || Instant::now() >= until {
            break;
        }
        let fault = faults[rng.index(faults.len())];
        let label = fault.name();
        history.log(
            0,
            Event::FaultStart {
                fault: label.to_owned(),
                unsafe_for_exclusion: fault.unsafe_for_exclusion(topology),
                split_brain: fault.split_brain(topology),
            },
        );
        let detail = if fault == Fault::WaiterKill {
            Some(waiter_kill.apply(rng, clients).await)
        } else {
            apply(fault, rng, servers, clients).await;
            None
        };
        history.log(
            0,
            Event::FaultEnd {
                fault: label.to_owned(),
            },
        );
        *counts.entry(label).or_default() += 1;
        if let Some(detail) = detail {
            *counts.entry(detail).or_default() += 1;
        }
    }
    counts
}

async fn apply(fault: Fault, rng: &mut Rng, servers: &mut Servers, clients: &mut Clients) {
    match fault {
        Fault::ClientPause => {
            let victim = &clients.live[rng.index(clients.live.len())];
            victim.signal(Signal::SIGSTOP);
            sleep(rng.millis(LEASE * 3 / 2, LEASE * 3)).await;
            victim.signal(Signal::SIGCONT);
        }
        // Applied by `run`, which holds its state.
        Fault::WaiterKill => {}
        Fault::ClientKill => {
            let victim = rng.index(clients.live.len());
            if let Err(e) = clients.kill_and_replace(victim).await {
                eprintln!("verify: could not start a replacement client: {e}");
            }
        }
        Fault::RedisPause => {
            let (low, high) = match servers {
                // Below down-after (1 s) most times, past it sometimes.
                Servers::Sentinel(_) => (Duration::from_millis(300), Duration::from_millis(1500)),
                // Below the node timeout (2 s): no failover.
                Servers::Cluster(_) => (Duration::from_millis(300), Duration::from_millis(1500)),
                _ => (Duration::from_millis(300), LEASE * 5 / 2),
            };
            let pause = rng.millis(low, high);
            let victim = pick_master(servers, rng);
            if let Some(server) = victim {
                tokio::task::block_in_place(|| server.pause());
                sleep(pause).await;
                server.resume();
            }
        }
        Fault::RedisRestartPersistent | Fault::RedisRestartEmpty => {
            let empty = fault == Fault::RedisRestartEmpty;
            let down = rng.millis(Duration::ZERO, Duration::from_millis(1500));
            let server = match servers {
                Servers::Single { server, .. } => server,
                Servers::Redlock(nodes) => {
                    let i = rng.index(nodes.len());
                    &mut nodes[i]
                }
                _ => return,
            };
            tokio::task::block_in_place(|| server.kill());
            if empty {
                // Data gone with the process: the append-only file too.
                let _ = std::fs::remove_dir_all(server.dir().join("appendonlydir"));
            }
            sleep(down).await;
            tokio::task::block_in_place(|| server.restart());
        }
        Fault::ProxyCut | Fault::ProxyLatency | Fault::ProxyBlackhole => {
            let Servers::Single { proxy, .. } = servers else {
                return;
            };
            match fault {
                Fault::ProxyCut => proxy.cut_all(),
                Fault::ProxyLatency => {
                    proxy.set_latency(
                        rng.millis(Duration::from_millis(5), Duration::from_millis(150)),
                    );
                    sleep(rng.millis(Duration::from_millis(500), Duration::from_millis(4000)))
                        .await;
                    proxy.set_latency(Duration::ZERO);
                }
                _ => {
                    proxy.blackhole(true);
                    sleep(rng.millis(Duration::from_millis(200), LEASE * 2)).await;
                    proxy.blackhole(false);
                }
            }
        }
        Fault::Failover => failover(servers, rng).await,
        Fault::Reshard => {
            if let Servers::Cluster(cluster) = servers {
                reshard::apply(cluster, rng).await;
            }
        }
        Fault::MasterKill => {
            let Servers::Cluster(cluster) = servers else {
                return;
            };
            let masters = cluster.master_indices();
            let victim = masters[rng.index(masters.len())];
            tokio::task::block_in_place(|| cluster.nodes_mut()[victim].kill());
            let _ =
                tokio::task::block_in_place(|| cluster.wait_until_healthy(Duration::from_secs(60)));
            tokio::task::block_in_place(|| cluster.nodes_mut()[victim].restart());
            let _ =
                tokio::task::block_in_place(|| cluster.wait_until_healthy(Duration::from_secs(60)));
        }
    }
}

fn pick_master<'a>(servers: &'a Servers, rng: &mut Rng) -> Option<&'a distlock_tests::RedisServer> {
    match servers {
        Servers::Single { server, .. } => Some(server),
        Servers::Cluster(cluster) => {
            let masters = cluster.master_indices();
            masters
                .get(rng.index(masters.len().max(1)))
                .map(|&i| &cluster.nodes()[i])
        }
        Servers::Sentinel(set) => {
            let port = set.master_port()?;
            set.servers.iter().find(|s| s.port() == port)
        }
        Servers::Redlock(nodes) => Some(&nodes[rng.index(nodes.len())]),
    }
}

async fn failover(servers: &mut Servers, rng: &mut Rng) {
    match servers {
        Servers::Sentinel(set) => tokio::task::block_in_place(|| set.failover()),
        Servers::Cluster(cluster) => {
            let replicas: Vec<usize> = (0..cluster.nodes().len())
                .filter(|i| !cluster.master_indices().contains(i))
                .collect();
            if replicas.is_empty() {
                return;
            }
            let node = &cluster.nodes()[replicas[rng.index(replicas.len())]];
            distlock_tests::fault::cluster::failover(node, None, Duration::from_secs(60)).await;
            let _ =
                tokio::task::block_in_place(|| cluster.wait_until_healthy(Duration::from_secs(60)));
        }
        _ => {}
    }
}
