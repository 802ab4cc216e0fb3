//! [`ModelError`]: a run the model cannot answer faithfully. Never a Redis error reply
//! (those are [`crate::Reply::Error`]): each of these fails the run that met it.

/// Why the model refused to go on. Each names what it met, so that a failed run says which
/// command, option, library local or Lua failure to look at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A script called a command the model does not implement.
    #[error("the model does not know the command `{0}` (a script called it)")]
    UnknownCommand(String),
    /// A script used something the model deliberately leaves out (an option of a known
    /// command, a Redis Lua API, a global of Redis' sandbox, a RESP3 reply type…).
    #[error("the model does not model {0}")]
    NotModelled(String),
    /// A call changed a library-level value that is not part of the model's state: a table
    /// (its contents) or a function reachable from the registered callbacks.
    #[error("a call to `{function}` changed `{path}`, which is not part of the model's state")]
    ConstantChanged {
        /// The function called.
        function: String,
        /// Where the value lives: the upvalue path from a registered callback.
        path: String,
    },
    /// Two Lua runtimes loaded the same library text differently (different functions,
    /// locals or values): the model could not give the same answer on every worker.
    #[error("library `{library}` loads differently on two runtimes: {what}")]
    Inconsistent {
        /// The library's name.
        library: String,
        /// What differed.
        what: String,
    },
    /// The embedded Lua failed outside any script's control (out of memory, a bug of the
    /// shim).
    #[error("the embedded Lua failed: {0}")]
    Lua(String),
}

impl From<mlua::Error> for ModelError {
    fn from(error: mlua::Error) -> Self {
        Self::Lua(error.to_string())
    }
}
