//! The client processes: this binary in its client sub-mode, one history file each.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::args::{Control, Topology};
use crate::history::{Event, HistoryWriter};
use crate::http::ports::Ports;

/// How a client process is started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The topology (the client builds its own `LockClient`).
    pub topology: Topology,
    /// The lock servers' addresses.
    pub urls: Vec<String>,
    /// The fenced resource's address.
    pub resource: String,
    /// Where histories and logs go.
    pub dir: PathBuf,
    /// The run's seed (each process derives its own).
    pub seed: u64,
    /// Tasks per process.
    pub tasks: u32,
    /// A negative control.
    pub control: Option<Control>,
    /// Upper bound on a client's life.
    pub limit: Duration,
}

/// A running client process.
#[derive(Debug)]
pub struct ClientProc {
    /// Its process number in the history.
    pub proc: u32,
    child: Child,
}

impl ClientProc {
    /// The OS pid (while not reaped).
    pub fn pid(&self) -> Option<Pid> {
        self.child.id().map(|id| Pid::from_raw(id as i32))
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGKILL).
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, signal);
        }
    }
}

/// Every client process of the run.
#[derive(Debug)]
pub struct Clients {
    launch: Launch,
    history: HistoryWriter,
    ports: Ports,
    next_proc: u32,
    /// The live processes.
    pub live: Vec<ClientProc>,
}

impl Clients {
    /// Starts `count` processes, with the ports directory their HTTP servers publish in.
    ///
    /// # Errors
    /// When a process cannot be spawned.
    pub fn start(launch: Launch, history: HistoryWriter, count: u32) -> std::io::Result<Self> {
        let ports = Ports::create(launch.dir.join("ports"))?;
        let mut clients = Self {
            launch,
            history,
            ports,
            next_proc: 1,
            live: Vec::new(),
        };
        for _ in 0..count {
            clients.spawn()?;
        }
        Ok(clients)
    }

    /// Starts one more process.
    ///
    /// # Errors
    /// When it cannot be spawned.
    pub fn spawn(&mut self) -> std::io::Result<()> {
        let proc = self.next_proc;
        self.next_proc += 1;
        let l = &self.launch;
        let log = std::fs::File::create(l.dir.join(format!("client-{proc}.log")))?;
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["client", "--topology", &l.topology.to_string()])
            .args(["--urls", &l.urls.join(",")])
            .args(["--resource", &l.resource])
            .args([
                "--history",
                &l.dir
                    .join(format!("client-{proc}.jsonl"))
                    .display()
                    .to_string(),
            ])
            .args(["--proc", &proc.to_string()])
            .args([
                "--seed",
                &(l.seed.wrapping_mul(1_000_003) ^ u64::from(proc)).to_string(),
            ])
            .args(["--tasks", &l.tasks.to_string()])
            .args(["--ports", &self.ports.dir().display().to_string()])
            .args(["--limit", &l.limit.as_secs().to_string()]);
        if let Some(control) = l.control {
            cmd.args(["--control", &control.to_string()]);
        }
        let child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        self.history.log_at(
            distlock_tests::fault::clock::monotonic_ns(),
            u64::from(proc),
            Event::ClientStart { pid },
        );
        self.live.push(ClientProc { proc, child });
        Ok(())
    }

    /// SIGKILLs the live process at `index` (withdrawing its port) and starts a replacement
    /// (which publishes a new one).
    ///
    /// # Errors
    /// When the replacement cannot be spawned.
    pub async fn kill_and_replace(&mut self, index: usize) -> std::io::Result<()> {
        let mut victim = self.live.remove(index);
        victim.signal(Signal::SIGKILL);
        self.ports.remove(victim.proc);
        self.history
            .log(u64::from(victim.proc), Event::ClientKilled);
        let _ = victim.child.wait().await;
        self.spawn()
    }

    /// Closes every process's stdin (they stop), waits up to `bound`, then kills the rest.
    /// Returns how many had to be killed.
    pub async fn stop(&mut self, bound: Duration) -> usize {
        for client in &mut self.live {
            client.signal(Signal::SIGCONT);
            drop(client.child.stdin.take());
        }
        let mut killed = 0;
        for client in &mut self.live {
            if tokio::time::timeout(bound, client.child.wait())
                .await
                .is_err()
            {
                client.signal(Signal::SIGKILL);
                let _ = client.child.wait().await;
                killed += 1;
            }
        }
        killed
    }
}
