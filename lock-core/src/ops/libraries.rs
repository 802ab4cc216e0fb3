//! distlock's Functions libraries as the servers have them, for operators across upgrades:
//! which versions each node holds (`FUNCTION LIST`), and removing a version no client
//! calls any more (`FUNCTION DELETE`).
//!
//! Every version's library is named `distlock_<version>` and its functions
//! `distlock_<version>_…`, so versions live side by side on a server (a rolling upgrade);
//! nothing removes an old one by itself, since Redis cannot tell which clients still call it.

use std::collections::HashMap;
use std::fmt;

use redis::{Cmd, RedisError, RedisResult, Value};

use crate::error::{bounded, LockError};
use crate::lock::engine::Engine;
use crate::protocol::library::{LIBRARY, LIBRARY_NAME};
use crate::protocol::name::LockName;

/// The text of this version's Functions library, as `FUNCTION LOAD` takes it: for an
/// operator who loads it with their own tooling (`distlock functions source | redis-cli -x
/// FUNCTION LOAD REPLACE`) rather than [`LockClient::load_functions`](crate::LockClient::load_functions)
/// or `distlock functions load`. Its first line names the library, and so its version.
///
/// ```
/// assert!(lock_core::ops::FUNCTIONS_SOURCE.starts_with("#!lua name=distlock_"));
/// ```
pub const FUNCTIONS_SOURCE: &str = LIBRARY;

/// What every version's library name starts with.
const NAME_PREFIX: &str = "distlock_";

/// The version of this crate's library: the number after [`NAME_PREFIX`] in its name.
pub(crate) const CURRENT_VERSION: u32 = version_digits(LIBRARY_NAME.as_bytes());

/// The digits after `distlock_` in `name`, read at compile time (a name that is not
/// `distlock_<digits>` fails the build).
const fn version_digits(name: &[u8]) -> u32 {
    let mut i = NAME_PREFIX.len();
    assert!(name.len() > i, "the library's name has no version");
    let mut version: u32 = 0;
    while i < name.len() {
        assert!(
            name[i].is_ascii_digit(),
            "the library's name is distlock_<digits>"
        );
        version = version * 10 + (name[i] - b'0') as u32;
        i += 1;
    }
    version
}

/// The library name of `version`: `distlock_<version>`.
pub(crate) fn library_name(version: u32) -> String {
    format!("{NAME_PREFIX}{version}")
}

/// The version in a library's name, when it is one of distlock's (`distlock_<digits>`);
/// `None` for any other library the pattern matched (`distlock_custom`, `DISTLOCK_1`).
fn version_of(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(NAME_PREFIX)?;
    let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    all_digits.then(|| digits.parse().ok()).flatten()
}

/// One node [`list_functions`](crate::LockClient::list_functions) and
/// [`remove_functions`](crate::LockClient::remove_functions) reached: one of the client's
/// nodes, or one master of a Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionNode {
    index: usize,
    master: Option<String>,
}

impl FunctionNode {
    /// Its position among the client's nodes: 0 for one server, the master the Sentinels
    /// name, or a Cluster (its masters are told apart by
    /// [`cluster_master`](Self::cluster_master)); the Redlock nodes in the order given.
    pub fn index(&self) -> usize {
        self.index
    }

    /// For a Cluster's master: the `host:port` it announces, or its node id when it
    /// announces none.
    pub fn cluster_master(&self) -> Option<&str> {
        self.master.as_deref()
    }
}

impl fmt::Display for FunctionNode {
    /// The Cluster master's name, else `node <index>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.master {
            Some(master) => f.write_str(master),
            None => write!(f, "node {}", self.index),
        }
    }
}

/// One version of distlock's library on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionLibrary {
    name: String,
    version: u32,
    functions: usize,
}

impl FunctionLibrary {
    /// Its name, `distlock_<version>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// How many functions it registers (Cluster variants included).
    pub fn functions(&self) -> usize {
        self.functions
    }

    /// True for the version this crate calls
    /// ([`LockClient::FUNCTIONS_VERSION`](crate::LockClient::FUNCTIONS_VERSION)).
    pub fn is_current(&self) -> bool {
        self.version == CURRENT_VERSION
    }
}

/// The versions of distlock's library one node has, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLibraries {
    node: FunctionNode,
    libraries: Vec<FunctionLibrary>,
}

impl NodeLibraries {
    /// The node.
    pub fn node(&self) -> &FunctionNode {
        &self.node
    }

    /// Its distlock libraries, oldest version first; empty when it has none.
    pub fn libraries(&self) -> &[FunctionLibrary] {
        &self.libraries
    }
}

/// `FUNCTION LIST LIBRARYNAME distlock_*` (a glob: Redis matches the whole name).
fn list_cmd() -> Cmd {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LIST")
        .arg("LIBRARYNAME")
        .arg(format!("{NAME_PREFIX}*"));
    cmd
}

/// Every distlock library on every node of `engine`.
pub(crate) async fn list(engine: &Engine) -> Result<Vec<NodeLibraries>, LockError> {
    let what = LockName::from(format!("{NAME_PREFIX}*"));
    let read = |answer: RedisResult<Value>| parse_list(answer?);
    let listed = on_every_node(engine, &what, &list_cmd(), read).await?;
    Ok(listed
        .into_iter()
        .map(|(node, libraries)| NodeLibraries { node, libraries })
        .collect())
}

/// Deletes the library of `version` from every node of `engine` that has it: the nodes it
/// was deleted from.
pub(crate) async fn remove(engine: &Engine, version: u32) -> Result<Vec<FunctionNode>, LockError> {
    let name = library_name(version);
    let what = LockName::from(name.as_str());
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("DELETE").arg(&name);
    let read = |answer: RedisResult<Value>| match answer {
        Ok(_) => Ok(true),
        Err(error) if is_missing_library(&error) => Ok(false),
        Err(error) => Err(error),
    };
    let deleted = on_every_node(engine, &what, &cmd, read).await?;
    Ok((deleted.into_iter())
        .filter_map(|(node, deleted)| deleted.then_some(node))
        .collect())
}

/// `ERR Library not found`: this node does not have it.
fn is_missing_library(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && (error.detail()).is_some_and(|d| d.starts_with("Library not found"))
}

/// The distlock libraries in a `FUNCTION LIST` answer (RESP2 or RESP3), oldest first.
fn parse_list(answer: Value) -> RedisResult<Vec<FunctionLibrary>> {
    let listed: Vec<HashMap<String, Value>> = redis::from_redis_value(answer)?;
    let mut libraries = Vec::new();
    for mut library in listed {
        let name = library.remove("library_name").unwrap_or(Value::Nil);
        let name: String = redis::from_redis_value(name)?;
        let Some(version) = version_of(&name) else {
            continue;
        };
        let functions = library.remove("functions").unwrap_or(Value::Nil);
        let functions: Vec<Value> = redis::from_redis_value(functions)?;
        libraries.push(FunctionLibrary {
            name,
            version,
            functions: functions.len(),
        });
    }
    libraries.sort_by_key(|l| l.version);
    Ok(libraries)
}

/// Sends `cmd` to every node of `engine` — each master of a Cluster, found with `CLUSTER
/// SLOTS` — and reads each answer (a server's error included) with `read`; every call is
/// bounded by the command timeout. Stops at the first node that fails.
async fn on_every_node<T>(
    engine: &Engine,
    what: &LockName,
    cmd: &Cmd,
    read: impl Fn(RedisResult<Value>) -> RedisResult<T>,
) -> Result<Vec<(FunctionNode, T)>, LockError> {
    engine.refuse_if_down(what)?;
    let timeout = engine.config.command_timeout;
    let mut out = Vec::new();
    for (index, conn) in engine.nodes.iter().enumerate() {
        #[cfg(feature = "cluster")]
        if let Some(lazy) = conn.as_cluster() {
            let mut cluster = bounded(what, timeout, lazy.get()).await?;
            for (master, answer) in on_every_master(&mut cluster, what, timeout, cmd, &read).await?
            {
                let node = FunctionNode {
                    index,
                    master: Some(master),
                };
                out.push((node, answer));
            }
            continue;
        }
        let mut conn = conn.clone();
        let answer = bounded(what, timeout, async {
            read(cmd.query_async(&mut conn).await)
        });
        let node = FunctionNode {
            index,
            master: None,
        };
        out.push((node, answer.await?));
    }
    Ok(out)
}

/// `cmd`'s answer from each master of a Cluster, read with `read`, routed by one of its
/// slots (a read such as `FUNCTION LIST` would otherwise go to one node picked at random).
#[cfg(feature = "cluster")]
async fn on_every_master<T>(
    cluster: &mut redis::cluster_async::ClusterConnection,
    what: &LockName,
    timeout: std::time::Duration,
    cmd: &Cmd,
    read: impl Fn(RedisResult<Value>) -> RedisResult<T>,
) -> Result<Vec<(String, T)>, LockError> {
    use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

    let slots = cluster.route_command(
        redis::cmd("CLUSTER").arg("SLOTS").clone(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    );
    let slots = async { crate::ops::list::cluster_masters(slots.await?) };
    let mut answers = Vec::new();
    for master in bounded(what, timeout, slots).await? {
        let route = Route::new(master.slot, SlotAddr::Master);
        let node = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
        let call = cluster.route_command(cmd.clone(), node);
        // A server's error comes back as a value: taken out, for `read` to judge.
        let answer = bounded(what, timeout, async {
            read(call.await.and_then(Value::extract_error))
        });
        answers.push((master.label, answer.await?));
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_version_is_the_library_names() {
        assert_eq!(library_name(CURRENT_VERSION), LIBRARY_NAME);
        assert_eq!(version_of(LIBRARY_NAME), Some(CURRENT_VERSION));
    }

    #[test]
    fn only_distlock_versions_are_read() {
        assert_eq!(version_of("distlock_1"), Some(1));
        assert_eq!(version_of("distlock_17"), Some(17));
        for other in [
            "distlock_",
            "distlock_x",
            "distlock_+1",
            "DISTLOCK_1",
            "mylib",
        ] {
            assert_eq!(version_of(other), None, "{other}");
        }
    }

    /// RESP2's flat pairs and RESP3's maps read alike; other libraries are left out.
    #[test]
    fn a_function_list_answer_is_read_in_either_protocol() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let function = Value::Array(vec![bulk("name"), bulk("distlock_1_acquire")]);
        let resp2 = |name: &str, functions: Vec<Value>| {
            Value::Array(vec![
                bulk("library_name"),
                bulk(name),
                bulk("engine"),
                bulk("LUA"),
                bulk("functions"),
                Value::Array(functions),
            ])
        };
        let answer = Value::Array(vec![
            resp2("distlock_2", vec![function.clone(), function.clone()]),
            resp2("distlock_custom", vec![]),
            resp2("distlock_1", vec![function.clone()]),
        ]);
        let read = parse_list(answer).unwrap();
        let summary: Vec<(u32, usize)> = read.iter().map(|l| (l.version, l.functions)).collect();
        assert_eq!(summary, [(1, 1), (2, 2)]);
        let resp3 = Value::Array(vec![Value::Map(vec![
            (bulk("library_name"), bulk("distlock_4")),
            (bulk("functions"), Value::Array(vec![function])),
        ])]);
        assert_eq!(parse_list(resp3).unwrap()[0].name(), "distlock_4");
        assert!(parse_list(Value::Int(1)).is_err());
    }
}
