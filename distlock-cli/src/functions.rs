//! `distlock functions`: distlock's Redis Functions library on the servers — loading this
//! version ahead of the services, listing the versions each node has, and removing those no
//! service calls any more, after an upgrade.

use clap::{ArgGroup, Subcommand};
use lock_core::ops::{FunctionNode, NodeLibraries, FUNCTIONS_SOURCE};
use lock_core::{LockClient, LockError};
use serde_json::{json, Value};

use crate::{explain, redacted, render, Error};

/// The rule an operator's Redis user needs for every `functions` subcommand (on a
/// Cluster, `+cluster|slots` as well): it reads and changes libraries only.
pub(crate) const OPERATOR_RULE: &str = "+function|load +function|list +function|delete";

#[derive(Debug, Subcommand)]
pub(crate) enum Functions {
    /// Loads the library on every node (every master of a Cluster), replacing one of the
    /// same version, and prints its name. Services load it by themselves on first use;
    /// load it ahead of time when their Redis user may run FCALL but not FUNCTION LOAD
    /// (least privilege). Run it as a user allowed `FUNCTION LOAD` (`+function|load`).
    Load,
    /// Prints the library's text, as `FUNCTION LOAD` takes it, for loading it with your own
    /// tooling (`distlock functions source | redis-cli -x FUNCTION LOAD REPLACE`). Needs no
    /// Redis.
    Source,
    /// Lists the versions of the library on every node (every master of a Cluster, every
    /// Redlock node), each with its number of functions, and marks the version this CLI
    /// speaks. Versions stay side by side after an upgrade (a rolling upgrade needs both)
    /// until removed. Run it as a user allowed `FUNCTION LIST` (`+function|list`; on a
    /// Cluster also `+cluster|slots`).
    List,
    /// Removes versions of the library from every node that has them. Redis cannot tell
    /// which clients call which version: remove a version only once no service runs a
    /// distlock release that calls it. A client that still does loads it again on its
    /// next call if its user may run FUNCTION LOAD; a least-privilege client (FCALL only)
    /// fails instead, its holds at their next renewal too, with an error that says to run
    /// `distlock functions load`. Run it as a user allowed `FUNCTION DELETE`
    /// (`+function|delete`; `+function|list` for `--older`).
    #[command(group(ArgGroup::new("which").required(true).args(["version", "older"])))]
    Remove {
        /// A version to remove (`1` removes `distlock_1`); repeat it for several.
        #[arg(long, value_name = "N")]
        version: Vec<u32>,
        /// Every version older than the one this CLI speaks (run the CLI of the release
        /// the services now use).
        #[arg(long)]
        older: bool,
        /// Also removes the version this CLI speaks, which its own clients still call.
        #[arg(long)]
        force: bool,
    },
}

/// Where a node's name comes from: the `--url` values, or the Sentinels' service.
pub(crate) struct Nodes<'a> {
    pub(crate) urls: &'a [String],
    pub(crate) sentinel: Option<&'a str>,
}

impl Nodes<'_> {
    /// A node as the operator named it: a Cluster master's address, the master of the
    /// Sentinels' service, or the `--url` it was given (without its password).
    fn name(&self, node: &FunctionNode) -> String {
        if let Some(master) = node.cluster_master() {
            return master.to_owned();
        }
        match (self.sentinel, self.urls.get(node.index())) {
            (Some(service), _) => format!("the master of {service}"),
            (None, Some(url)) => redacted(url),
            (None, None) => node.to_string(),
        }
    }
}

/// Runs a `functions` subcommand.
pub(crate) async fn run(
    client: &LockClient,
    command: Functions,
    nodes: &Nodes<'_>,
    json: bool,
) -> Result<(), Error> {
    match command {
        Functions::Load => {
            let library = client
                .load_functions()
                .await
                .map_err(|e| refusal(e, nodes))?;
            let loaded = json!({ "loaded": library });
            render::print(json, &loaded, || format!("loaded {library}\n"));
        }
        Functions::Source => print!("{FUNCTIONS_SOURCE}"),
        Functions::List => {
            let listed = client
                .list_functions()
                .await
                .map_err(|e| refusal(e, nodes))?;
            render::print(json, &list_json(&listed, nodes), || {
                list_text(&listed, nodes)
            });
        }
        Functions::Remove {
            version,
            older,
            force,
        } => {
            let versions = match older {
                true => older_versions(client, nodes).await?,
                false => version,
            };
            remove(client, &versions, force, nodes, json).await?;
        }
    }
    Ok(())
}

/// The error, with the rule to grant when Redis refused the operator's user.
fn refusal(error: LockError, nodes: &Nodes<'_>) -> Error {
    if matches!(error, LockError::Refused { .. }) {
        return format!("{error}; the operator's Redis user needs `{OPERATOR_RULE}`").into();
    }
    explain(error, nodes.urls)
}

/// Every version below this CLI's that some node has.
async fn older_versions(client: &LockClient, nodes: &Nodes<'_>) -> Result<Vec<u32>, Error> {
    let listed = client
        .list_functions()
        .await
        .map_err(|e| refusal(e, nodes))?;
    let mut versions: Vec<u32> = (listed.iter())
        .flat_map(|node| node.libraries().iter().map(|l| l.version()))
        .filter(|&v| v < LockClient::FUNCTIONS_VERSION)
        .collect();
    versions.sort_unstable();
    versions.dedup();
    Ok(versions)
}

/// Removes each of `versions`, refusing this CLI's own unless `force`: checked before
/// anything is removed.
async fn remove(
    client: &LockClient,
    versions: &[u32],
    force: bool,
    nodes: &Nodes<'_>,
    json: bool,
) -> Result<(), Error> {
    let current = LockClient::FUNCTIONS_VERSION;
    if versions.contains(&current) && !force {
        return Err(format!(
            "refusing to remove distlock_{current}, the version this CLI speaks: services of \
             this release call it (pass --force to remove it anyway; they load it again if \
             their user may run FUNCTION LOAD, and fail if not)"
        )
        .into());
    }
    let mut removed = Vec::new();
    for &version in versions {
        let from = client.remove_functions(version).await;
        let from: Vec<String> = (from.map_err(|e| refusal(e, nodes))?.iter())
            .map(|node| nodes.name(node))
            .collect();
        removed.push((version, from));
    }
    let value = Value::Array(
        (removed.iter())
            .map(|(version, from)| {
                json!({ "library": format!("distlock_{version}"), "version": version, "nodes": from })
            })
            .collect(),
    );
    render::print(json, &json!({ "removed": value }), || remove_text(&removed));
    Ok(())
}

/// `removed distlock_1 from redis://…, …` per version; `distlock_1: on no node`.
fn remove_text(removed: &[(u32, Vec<String>)]) -> String {
    let mut out = String::new();
    for (version, from) in removed {
        match from.is_empty() {
            true => out.push_str(&format!("distlock_{version}: on no node\n")),
            false => out.push_str(&format!(
                "removed distlock_{version} from {}\n",
                from.join(", ")
            )),
        }
    }
    if removed.is_empty() {
        out.push_str("no older version on any node\n");
    }
    out
}

/// `functions list --json`: the version this CLI speaks, and each node's libraries.
fn list_json(listed: &[NodeLibraries], nodes: &Nodes<'_>) -> Value {
    let nodes: Vec<Value> = (listed.iter())
        .map(|node| {
            let libraries: Vec<Value> = (node.libraries().iter())
                .map(|l| {
                    json!({
                        "name": l.name(),
                        "version": l.version(),
                        "functions": l.functions(),
                        "current": l.is_current(),
                    })
                })
                .collect();
            json!({ "node": nodes.name(node.node()), "libraries": libraries })
        })
        .collect();
    json!({
        "current": format!("distlock_{}", LockClient::FUNCTIONS_VERSION),
        "current_version": LockClient::FUNCTIONS_VERSION,
        "nodes": nodes,
    })
}

/// `functions list`: one row per library on each node, `(none)` for a node without one.
fn list_text(listed: &[NodeLibraries], nodes: &Nodes<'_>) -> String {
    let mut rows = vec![["NODE", "LIBRARY", "VERSION", "FUNCTIONS", ""].map(String::from)];
    for node in listed {
        let name = nodes.name(node.node());
        if node.libraries().is_empty() {
            rows.push([
                name.clone(),
                "(none)".into(),
                "-".into(),
                "-".into(),
                "".into(),
            ]);
        }
        for library in node.libraries() {
            rows.push([
                name.clone(),
                library.name().to_owned(),
                library.version().to_string(),
                library.functions().to_string(),
                match library.is_current() {
                    true => "this CLI's version".into(),
                    false => String::new(),
                },
            ]);
        }
    }
    render::columns(&rows)
}
