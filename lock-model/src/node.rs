//! [`Node`]: one Redis server of the model.

use std::sync::Arc;

use crate::call::{CallState, NodeData};
use crate::error::ModelError;
use crate::keyspace::{Entry, Keyspace};
use crate::library::{metadata, FunctionInfo, Library};
use crate::pubsub::{ClientId, Message, Publication};
use crate::reply::Reply;
use crate::runtime::{LoadError, Runtime};
use crate::shim::Scalar;

/// What a call changed on its node, as a replica receives it: each key it wrote, with its
/// final value and absolute expiry (or `None`: deleted), and what it published (a replica
/// delivers a master's publications to its own subscribers). Redis replicates a script's
/// effects, not the script, and a replica applies them as one unit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Effects {
    /// Keys written, in first-write order, with their state after the call.
    pub writes: Vec<(Vec<u8>, Option<Entry>)>,
    /// Publications, in order.
    pub publications: Vec<Publication>,
}

impl Effects {
    /// True when the call changed nothing a replica would see.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.publications.is_empty()
    }
}

/// What one call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOutcome {
    /// The reply (an error reply is a Redis error: see [`Reply::error_code`]).
    pub reply: Reply,
    /// The messages it published, with their receivers on this node.
    pub published: Vec<Message>,
    /// What it changed, for the node's replicas.
    pub effects: Effects,
}

impl CallOutcome {
    fn reply_only(reply: Reply) -> Self {
        Self {
            reply,
            published: Vec::new(),
            effects: Effects::default(),
        }
    }
}

/// A library on a node, and the values of its locals there that differ from their
/// load-time values (by local index), so that a node fresh from `FUNCTION LOAD` carries
/// none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct NodeLibrary {
    library: Arc<Library>,
    changed_locals: Vec<(u32, Scalar)>,
}

impl NodeLibrary {
    fn new(library: Arc<Library>) -> Self {
        Self {
            library,
            changed_locals: Vec::new(),
        }
    }

    /// Every local's value on this node.
    fn locals(&self) -> Vec<Scalar> {
        let mut values = self.library.initial.clone();
        for (i, value) in &self.changed_locals {
            values[*i as usize] = value.clone();
        }
        values
    }

    fn set_locals(&mut self, values: Vec<Scalar>) {
        self.changed_locals = values
            .into_iter()
            .zip(&self.library.initial)
            .enumerate()
            .filter(|(_, (value, initial))| value != *initial)
            .map(|(i, (value, _))| (i as u32, value))
            .collect();
    }
}

/// One Redis server: its keyspace, pub/sub subscribers, clock and Functions libraries.
/// Plain data (`Clone + Eq + Hash`), so model states hash; run its scripts with a
/// [`Runtime`].
///
/// Times: the explorer's model time `at` (ms) is given to each operation; the node's clock
/// reads `at` + its offset. Expiry and `TIME` use the node's clock, so a clock jump
/// ([`Node::set_clock_offset`]), or a failover to a node whose clock differs, changes what
/// expired and which tokens are issued.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Node {
    clock_offset: i64,
    data: NodeData,
    /// By library name.
    libraries: Vec<NodeLibrary>,
}

impl Node {
    /// An empty node, without any library, whose clock reads model time + `clock_offset`
    /// ms.
    pub fn new(clock_offset: i64) -> Self {
        Self {
            clock_offset,
            ..Self::default()
        }
    }

    /// The node's clock at model time `at` (ms).
    pub fn clock(&self, at: i64) -> i64 {
        at + self.clock_offset
    }

    /// Its clock's offset from model time (ms).
    pub fn clock_offset(&self) -> i64 {
        self.clock_offset
    }

    /// Steps its clock: from now on it reads model time + `clock_offset`.
    pub fn set_clock_offset(&mut self, clock_offset: i64) {
        self.clock_offset = clock_offset;
    }

    /// Its keys (read them at its clock: [`Node::clock`]).
    pub fn keyspace(&self) -> &Keyspace {
        &self.data.keyspace
    }

    /// The libraries it has loaded.
    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.iter().map(|l| &*l.library)
    }

    /// The function `name` and its library, if a library registered it.
    fn function(&self, name: &str) -> Option<(usize, &FunctionInfo)> {
        self.libraries
            .iter()
            .enumerate()
            .find_map(|(i, l)| l.library.function(name).map(|f| (i, f)))
    }

    /// `FUNCTION LOAD [REPLACE] source`: the library's name, or Redis' error reply. A
    /// library loaded (or replaced) starts with its locals' load-time values.
    ///
    /// # Errors
    /// A [`ModelError`] when the model met something it does not model in the text.
    pub fn function_load(
        &mut self,
        runtime: &Runtime,
        source: &str,
        replace: bool,
    ) -> Result<Reply, ModelError> {
        let name = match metadata(source) {
            Ok((_, name)) => name,
            Err(message) => return Ok(Reply::Error(format!("ERR {message}"))),
        };
        let existing = self.libraries.iter().position(|l| l.library.name == name);
        if existing.is_some() && !replace {
            return Ok(Reply::Error(format!("ERR Library '{name}' already exists")));
        }
        let library = match runtime.load(source) {
            Ok(library) => library,
            Err(LoadError::Refused(reply)) => return Ok(Reply::Error(reply)),
            Err(LoadError::Model(error)) => return Err(error),
        };
        for (i, other) in self.libraries.iter().enumerate() {
            if Some(i) == existing {
                continue;
            }
            if let Some(f) = library
                .functions
                .iter()
                .find(|f| other.library.function(&f.name).is_some())
            {
                return Ok(Reply::Error(format!(
                    "ERR Function {} already exists",
                    f.name
                )));
            }
        }
        match existing {
            Some(i) => self.libraries[i] = NodeLibrary::new(library),
            None => {
                self.libraries.push(NodeLibrary::new(library));
                self.libraries
                    .sort_by(|a, b| a.library.name.cmp(&b.library.name));
            }
        }
        Ok(Reply::Bulk(name.into_bytes()))
    }

    /// Loads `source` (`FUNCTION LOAD REPLACE`), failing when Redis would refuse it.
    ///
    /// # Errors
    /// [`LoadError::Refused`] with Redis' reply, or [`LoadError::Model`].
    pub fn load(&mut self, runtime: &Runtime, source: &str) -> Result<(), LoadError> {
        match self.function_load(runtime, source, true)? {
            Reply::Error(reply) => Err(LoadError::Refused(reply)),
            _ => Ok(()),
        }
    }

    /// Drops every library (`FUNCTION FLUSH`): the node answers `Function not found` to
    /// every call, as a server restarted without data does.
    pub fn flush_functions(&mut self) {
        self.libraries.clear();
    }

    /// `FCALL name numkeys keys… args…` at model time `at`. A function no library
    /// registered answers `ERR Function not found` (what lock-core reloads on).
    ///
    /// # Errors
    /// A [`ModelError`] when the call met something the model does not model: the run
    /// must stop (the node keeps what the call wrote before, as Redis would).
    pub fn fcall(
        &mut self,
        runtime: &Runtime,
        name: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        at: i64,
    ) -> Result<CallOutcome, ModelError> {
        self.call_function(runtime, name, keys, args, at, false)
    }

    /// `FCALL_RO`: as [`Node::fcall`], refused for a function not registered `no-writes`.
    ///
    /// # Errors
    /// As [`Node::fcall`].
    pub fn fcall_ro(
        &mut self,
        runtime: &Runtime,
        name: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        at: i64,
    ) -> Result<CallOutcome, ModelError> {
        self.call_function(runtime, name, keys, args, at, true)
    }

    fn call_function(
        &mut self,
        runtime: &Runtime,
        name: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        at: i64,
        read_only_call: bool,
    ) -> Result<CallOutcome, ModelError> {
        let Some((index, function)) = self.function(name) else {
            return Ok(CallOutcome::reply_only(Reply::error(
                "ERR Function not found",
            )));
        };
        if read_only_call && !function.no_writes() {
            return Ok(CallOutcome::reply_only(Reply::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            )));
        }
        let read_only = read_only_call || function.no_writes();
        let library = Arc::clone(&self.libraries[index].library);
        let loaded = runtime.library(&library)?;
        let locals = self.libraries[index].locals();
        let state = self.begin(at, read_only);
        let (state, result) = loaded.call(&library, name, keys, args, state, &locals);
        let (published, effects) = self.end(state);
        let (reply, after) = result?;
        self.libraries[index].set_locals(after);
        Ok(CallOutcome {
            reply,
            published,
            effects,
        })
    }

    /// `EVAL script numkeys keys… args…` at model time `at` (Redisson's scripts).
    ///
    /// # Errors
    /// As [`Node::fcall`].
    pub fn eval(
        &mut self,
        runtime: &Runtime,
        script: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        at: i64,
    ) -> Result<CallOutcome, ModelError> {
        let engine = runtime.eval_engine()?;
        let state = self.begin(at, false);
        let (state, result) = engine.eval(script.as_bytes(), keys, args, state);
        let (published, effects) = self.end(state);
        Ok(CallOutcome {
            reply: result?,
            published,
            effects,
        })
    }

    /// Moves the node's data into a call.
    fn begin(&mut self, at: i64, read_only: bool) -> CallState {
        CallState::new(std::mem::take(&mut self.data), self.clock(at), read_only)
    }

    /// Takes the node's data back from a call: what it published and changed.
    fn end(&mut self, state: CallState) -> (Vec<Message>, Effects) {
        let CallState {
            data,
            touched,
            published,
            ..
        } = state;
        self.data = data;
        let writes = touched
            .into_iter()
            .map(|key| {
                let entry = self.data.keyspace.raw(&key).cloned();
                (key, entry)
            })
            .collect();
        let publications = published.iter().map(|m| m.publication.clone()).collect();
        (
            published,
            Effects {
                writes,
                publications,
            },
        )
    }

    /// Subscribes `client` to `channel` (`SUBSCRIBE`, or `SSUBSCRIBE` when `sharded`).
    pub fn subscribe(&mut self, client: ClientId, channel: &[u8], sharded: bool) {
        self.data.pubsub.subscribe(client, channel, sharded);
    }

    /// Unsubscribes `client` from `channel`.
    pub fn unsubscribe(&mut self, client: ClientId, channel: &[u8], sharded: bool) {
        self.data.pubsub.unsubscribe(client, channel, sharded);
    }

    /// Drops every subscription of `client` (its connection closed, or it crashed).
    pub fn unsubscribe_all(&mut self, client: ClientId) {
        self.data.pubsub.unsubscribe_all(client);
    }

    /// True when `client` subscribes to `channel` here.
    pub fn is_subscribed(&self, client: ClientId, channel: &[u8], sharded: bool) -> bool {
        self.data.pubsub.is_subscribed(client, channel, sharded)
    }

    /// Deletes the keys expired at model time `at` (Redis' active expiry; lazily expired
    /// keys are absent to every command anyway, so this changes no reply: it keeps states
    /// that differ only by expired keys equal). The deletions replicate.
    pub fn expire(&mut self, at: i64) -> Effects {
        let now = self.clock(at);
        let writes = self
            .data
            .keyspace
            .expired(now)
            .into_iter()
            .map(|key| {
                self.data.keyspace.remove(&key);
                (key, None)
            })
            .collect();
        Effects {
            writes,
            publications: Vec::new(),
        }
    }

    /// A replica of this node, in sync with it, on a machine whose clock reads model time +
    /// `clock_offset`: the same keys and libraries (which the replica loaded itself, so
    /// their locals have their load-time values), and no subscriber (clients subscribe to
    /// the replica itself).
    ///
    /// A replica that missed the last k writes is a replica taken before them, with the
    /// [`Effects`] of those calls not yet [applied](Node::apply): the explorer keeps each
    /// replica's queue of pending effects, applies them one call at a time, and on a
    /// failover promotes the replica with whatever it has.
    pub fn replica(&self, clock_offset: i64) -> Node {
        Node {
            clock_offset,
            data: NodeData {
                keyspace: self.data.keyspace.clone(),
                ..NodeData::default()
            },
            libraries: self
                .libraries
                .iter()
                .map(|l| NodeLibrary::new(Arc::clone(&l.library)))
                .collect(),
        }
    }

    /// Applies a master's call's effects (replication): its writes, then its publications,
    /// which reach this node's subscribers (as a master's `PUBLISH` reaches a replica's).
    pub fn apply(&mut self, effects: &Effects) -> Vec<Message> {
        for (key, entry) in &effects.writes {
            self.data.keyspace.put(key, entry.clone());
        }
        effects
            .publications
            .iter()
            .map(|p| self.data.pubsub.deliver(p.clone()))
            .collect()
    }
}
