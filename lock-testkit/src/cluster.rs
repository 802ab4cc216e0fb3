//! [`RedisCluster`]: a local Redis Cluster made of private [`RedisServer`]
//! nodes, created with `redis-cli --cluster create`.

use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use crate::blocking::off_the_runtime;
use crate::error::StartError;
use crate::server::RedisServer;

/// Failure detection speed: low so failover tests finish in seconds.
const NODE_TIMEOUT_MS: &str = "2000";
/// Upper bound for `redis-cli --cluster create` (it waits for the join itself).
const CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound for the whole cluster to report healthy after creation.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between health polls: cluster state has no event to wait on.
const POLL: Duration = Duration::from_millis(100);
const TOTAL_SLOTS: &str = "16384";

/// A local Redis Cluster: `masters` masters with `replicas_per_master`
/// replicas each, every node a [`RedisServer`] with its fault controls.
///
/// A node keeps its ports and `nodes.conf` across [`RedisServer::restart`],
/// so it rejoins the cluster (with empty data). Dropping the cluster stops
/// every node and removes their dirs.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// The `redis-cli` binary: `$REDIS_CLI_BIN`, else `redis-cli` on `PATH`.
fn cli_bin() -> String {
    std::env::var("REDIS_CLI_BIN").unwrap_or_else(|_| "redis-cli".to_owned())
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every node
    /// reports `cluster_state:ok`, all 16384 slots assigned, every node known
    /// and every replica's link to its master up, blocking the thread meanwhile
    /// (seconds, with replicas): in an async test, prefer [`Self::try_start`].
    ///
    /// # Panics
    /// As [`Self::try_start`] fails.
    pub fn start(masters: usize, replicas_per_master: usize) -> RedisCluster {
        Self::start_blocking(masters, replicas_per_master).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Self::start`], without blocking the runtime (the start runs on Tokio's
    /// blocking pool), reporting a failure instead of panicking.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = lock_testkit::RedisCluster::try_start(3, 1).await?;
    /// // The seeds of a cluster client (lock-core's `LockClient::cluster`, say).
    /// let seeds: Vec<String> = cluster.seed_urls();
    /// assert_eq!(seeds.len(), 6);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`StartError::Failed`] when `masters < 3` (Redis Cluster's minimum), or creation or
    /// the health wait fails (the message includes what was last seen, or how to install
    /// a missing `redis-cli`); a node's own [`StartError`].
    pub async fn try_start(
        masters: usize,
        replicas_per_master: usize,
    ) -> Result<RedisCluster, StartError> {
        off_the_runtime(move || Self::start_blocking(masters, replicas_per_master)).await
    }

    fn start_blocking(
        masters: usize,
        replicas_per_master: usize,
    ) -> Result<RedisCluster, StartError> {
        if masters < 3 {
            return Err(StartError::Failed(format!(
                "Redis Cluster needs at least 3 masters, got {masters}"
            )));
        }
        let count = masters * (1 + replicas_per_master);
        let nodes = (0..count)
            .map(|_| {
                RedisServer::builder()
                    .cluster_node()
                    .args(["--cluster-node-timeout", NODE_TIMEOUT_MS])
                    .try_start_blocking()
            })
            .collect::<Result<_, _>>()?;
        let cluster = RedisCluster { nodes };
        cluster.create(replicas_per_master)?;
        (cluster.wait_until_healthy(HEALTHY_TIMEOUT))
            .map_err(|e| StartError::Failed(format!("cluster did not become healthy: {e}")))?;
        Ok(cluster)
    }

    /// All nodes, in creation order (`redis-cli` makes the first ones masters,
    /// but failovers change roles: use [`Self::master_indices`]).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// All nodes, mutably, for `stop()`, `kill()` and `restart()`.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// `redis://127.0.0.1:PORT` of every node, for a cluster client's seeds.
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Indices of the running nodes that currently report `role:master`.
    pub fn master_indices(&self) -> Vec<usize> {
        let is_master = |node: &RedisServer| {
            info(node, &["INFO", "replication"]).is_ok_and(|i| field(&i, "role") == Some("master"))
        };
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running() && is_master(&self.nodes[i]))
            .collect()
    }

    /// Polls every running node until the cluster is healthy (see
    /// [`Self::start`]) or `timeout` passes; the error says what was last wrong.
    /// Use it after killing a master to wait for the failover.
    pub fn wait_until_healthy(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let max_polls = timeout.as_millis() / POLL.as_millis() + 1;
        let mut last_problem = String::from("not checked");
        for _ in 0..max_polls {
            match self
                .nodes
                .iter()
                .filter(|n| n.is_running())
                .try_for_each(|n| node_healthy(n, self.nodes.len()))
            {
                Ok(()) => return Ok(()),
                Err(problem) => last_problem = problem,
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
        Err(format!("after {timeout:?}: {last_problem}"))
    }

    fn create(&self, replicas_per_master: usize) -> Result<(), StartError> {
        let mut cmd = Command::new(cli_bin());
        cmd.args(["--cluster", "create"]);
        cmd.args(self.nodes.iter().map(|n| n.addr().to_string()));
        cmd.args([
            "--cluster-replicas",
            &replicas_per_master.to_string(),
            "--cluster-yes",
        ]);
        let output = run_bounded(cmd, CREATE_TIMEOUT)?;
        if !output.status.success() {
            return Err(StartError::Failed(format!(
                "redis-cli --cluster create failed ({}):\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(())
    }
}

/// Runs `cmd` to completion, killing it and failing after `timeout`.
fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Output, StartError> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            StartError::Failed(format!("cannot run {cmd:?}: {e}; install redis-cli: `sudo apt-get install redis-tools` (Debian/Ubuntu), `brew install redis` (macOS), or point $REDIS_CLI_BIN at redis-cli or valkey-cli"))
        })?;
    let pid = Pid::from_child(&child);
    let (done_tx, done_rx) = mpsc::channel();
    // std has no wait-with-timeout; a thread waits and we wait on its message.
    std::thread::spawn(move || done_tx.send(child.wait_with_output()));
    match done_rx.recv_timeout(timeout) {
        Ok(output) => output.map_err(|e| StartError::Failed(format!("waiting for {cmd:?}: {e}"))),
        Err(_) => {
            // Not reaped yet (the thread still waits on it), so the pid is ours.
            let _ = kill_process(pid, Signal::KILL);
            Err(StartError::Failed(format!(
                "{cmd:?} did not finish within {timeout:?}"
            )))
        }
    }
}

/// Ok if `node` sees a fully working cluster of `total` nodes.
fn node_healthy(node: &RedisServer, total: usize) -> Result<(), String> {
    let port = node.port();
    let cluster = info(node, &["CLUSTER", "INFO"])?;
    let expect = |name: &str, want: &str| match field(&cluster, name) {
        Some(got) if got == want => Ok(()),
        got => Err(format!("node {port}: {name} is {got:?}, want {want}")),
    };
    expect("cluster_state", "ok")?;
    expect("cluster_slots_assigned", TOTAL_SLOTS)?;
    expect("cluster_known_nodes", &total.to_string())?;
    let replication = info(node, &["INFO", "replication"])?;
    if field(&replication, "role") == Some("slave")
        && field(&replication, "master_link_status") != Some("up")
    {
        return Err(format!("node {port}: replica link to its master is not up"));
    }
    Ok(())
}

/// Runs an INFO-style command on its own short-lived connection (bounded by
/// socket timeouts, so a paused node can't hang the caller).
fn info(node: &RedisServer, command: &[&str]) -> Result<String, String> {
    let fail = |e: redis::RedisError| format!("node {}: {}: {e}", node.port(), command.join(" "));
    let mut conn = node
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(fail)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(fail)?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(fail)?;
    let mut cmd = redis::cmd(command[0]);
    cmd.arg(&command[1..]);
    cmd.query(&mut conn).map_err(fail)
}

/// The value of `name:value` in INFO-style output.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::ping;

    #[test]
    fn field_parses_info_lines() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_state_x:no\r\n";
        assert_eq!(field(info, "cluster_state"), Some("ok"));
        assert_eq!(field(info, "missing"), None);
    }

    #[test]
    #[should_panic(expected = "at least 3 masters")]
    fn fewer_than_three_masters_is_rejected() {
        RedisCluster::start(2, 0);
    }

    #[tokio::test]
    async fn fewer_than_three_masters_is_an_error_too() {
        let error = RedisCluster::try_start(2, 0).await.unwrap_err();
        assert!(error.to_string().contains("at least 3 masters"), "{error}");
    }

    /// Started without blocking the test's (current-thread) runtime: a task of it runs
    /// while the nodes come up. (With the blocking `start`, the check fails: the task
    /// has not run yet when the start returns.)
    #[tokio::test]
    async fn three_masters_with_replicas_come_up_healthy() {
        let ticks = tokio::spawn(async {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let cluster = RedisCluster::try_start(3, 1).await.unwrap();
        assert!(
            ticks.is_finished(),
            "the runtime ran its tasks during the start"
        );
        assert_eq!(cluster.nodes().len(), 6);
        assert_eq!(cluster.seed_urls().len(), 6);
        assert_eq!(cluster.master_indices().len(), 3);
        for node in cluster.nodes() {
            assert_eq!(ping(&mut node.conn().await).await.unwrap(), "PONG");
            let enabled = info(node, &["INFO", "cluster"]).unwrap();
            assert_eq!(field(&enabled, "cluster_enabled"), Some("1"));
        }
    }

    #[test]
    fn killing_a_master_fails_over_to_its_replica() {
        let mut cluster = RedisCluster::start(3, 1);
        let victim = cluster.master_indices()[0];
        cluster.nodes_mut()[victim].kill();
        // Failure detection (2 s node timeout) plus the replica's election.
        cluster.wait_until_healthy(HEALTHY_TIMEOUT).unwrap();
        let masters = cluster.master_indices();
        assert_eq!(masters.len(), 3, "a replica must have been promoted");
        assert!(!masters.contains(&victim));
    }
}
