//! [`Engine`]: one Lua state with the sandbox installed, and the bridge by which its
//! `redis.call` reaches the node data of the call in progress.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::convert;
use super::sandbox::SANDBOX;
use crate::call::CallState;
use crate::commands::run_from_script;
use crate::error::ModelError;
use crate::reply::Reply;

/// The chunk name Redis gives a library's code (`@user_function`) and an EVAL script
/// (`@user_script`): error messages and the coverage hook read them.
pub(crate) const FUNCTION_CHUNK: &str = "@user_function";
pub(crate) const SCRIPT_CHUNK: &str = "@user_script";

/// A Lua state with the sandbox, and the call it serves.
pub(crate) struct Engine {
    pub(crate) lua: Lua,
    pub(crate) helpers: Table,
    env: Table,
    /// The data of the call in progress, moved in by [`Self::with_call`].
    call: Rc<RefCell<Option<CallState>>>,
    /// The error table `redis.call` raised last, until a catcher takes it (see the
    /// sandbox's `translate`).
    pending: Rc<RefCell<Option<Table>>>,
    /// Why the model refused the call in progress (set by `redis.call` or `loud`, read
    /// after the call whatever the script did with the error it raised).
    failure: Rc<RefCell<Option<ModelError>>>,
}

/// A Lua 5.1 state with the string, table and math libraries (the base library comes
/// with every state) and the debug library, which only the sandbox keeps (see below).
#[allow(unsafe_code)]
fn new_lua() -> Lua {
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::DEBUG;
    // SAFETY: mlua calls the debug library unsafe because Lua code holding it can break
    // the invariants mlua relies on. Here no script ever holds it: `Engine::new` takes it
    // out of the globals before any other code runs and hands it only to the sandbox's own
    // helpers (upvalue access for the library's locals, and the error handler's line), as
    // Redis hands `debug` to its error handler and then sets the global to nil. Scripts
    // run with the sandbox's environment, which has no `debug`, `loadstring`, `getfenv` or
    // `_G` (those names fail the run).
    unsafe { Lua::unsafe_new_with(libs, LuaOptions::new()) }
}

impl Engine {
    /// A new Lua state with the sandbox installed.
    pub(crate) fn new() -> Result<Self, ModelError> {
        let lua = new_lua();
        let globals = lua.globals();
        let debug: Table = globals.get("debug")?;
        globals.set("debug", Value::Nil)?;
        let call: Rc<RefCell<Option<CallState>>> = Rc::new(RefCell::new(None));
        let failure: Rc<RefCell<Option<ModelError>>> = Rc::new(RefCell::new(None));
        let pending: Rc<RefCell<Option<Table>>> = Rc::new(RefCell::new(None));
        let redis_call = {
            let (call, failure) = (Rc::clone(&call), Rc::clone(&failure));
            let pending = Rc::clone(&pending);
            lua.create_function(move |lua, args: MultiValue| {
                match execute(lua, &args, &call, &failure)? {
                    Ok(reply) => Ok(reply),
                    Err(error) => {
                        *pending.borrow_mut() = Some(error);
                        Err(mlua::Error::runtime("a Redis error reply (redis.call)"))
                    }
                }
            })?
        };
        let redis_pcall = {
            let (call, failure) = (Rc::clone(&call), Rc::clone(&failure));
            lua.create_function(move |lua, args: MultiValue| {
                Ok(match execute(lua, &args, &call, &failure)? {
                    Ok(reply) => reply,
                    Err(error) => Value::Table(error),
                })
            })?
        };
        let take_pending = {
            let pending = Rc::clone(&pending);
            lua.create_function(move |_, ()| Ok(pending.borrow_mut().take()))?
        };
        let loud = {
            let failure = Rc::clone(&failure);
            lua.create_function(move |_, what: String| -> mlua::Result<()> {
                let error = ModelError::NotModelled(what);
                let message = error.to_string();
                failure.borrow_mut().get_or_insert(error);
                Err(mlua::Error::runtime(message))
            })?
        };
        let helpers: Table = lua
            .load(SANDBOX)
            .set_name("=distlock-model sandbox")
            .set_mode(ChunkMode::Text)
            .call((debug, redis_call, redis_pcall, take_pending, loud))?;
        let env: Table = helpers.get::<Function>("env")?.call(())?;
        Ok(Self {
            lua,
            helpers,
            env,
            call,
            pending,
            failure,
        })
    }

    /// Compiles `code` as a chunk named `chunk`, in the sandbox's environment: the
    /// function, or Lua's error message.
    pub(crate) fn compile(&self, code: &[u8], chunk: &str) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(chunk)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// A helper of the sandbox.
    pub(crate) fn helper(&self, name: &str) -> Result<Function, ModelError> {
        Ok(self.helpers.get::<Function>(name)?)
    }

    /// Runs `run` with `state` as the data `redis.call` reaches, then gives the data back
    /// with what `run` returned, or with the failure the model met during it.
    pub(crate) fn with_call<R>(
        &self,
        state: CallState,
        run: impl FnOnce() -> Result<R, ModelError>,
    ) -> (CallState, Result<R, ModelError>) {
        *self.failure.borrow_mut() = None;
        *self.pending.borrow_mut() = None;
        *self.call.borrow_mut() = Some(state);
        let result = run();
        let state = self
            .call
            .borrow_mut()
            .take()
            .expect("the call's data stays in place while it runs");
        let result = match self.failure.borrow_mut().take() {
            Some(failure) => Err(failure),
            None => result,
        };
        (state, result)
    }

    /// An array of strings as a Lua table (a call's keys or arguments).
    pub(crate) fn strings(&self, items: &[Vec<u8>]) -> Result<Table, ModelError> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(item)?)?;
        }
        Ok(t)
    }

    /// What a script run by `helpers.run`/`helpers.eval` replies: its result, or its error
    /// with the script's name and line as `luaCallFunction` writes them.
    pub(crate) fn reply_of(
        &self,
        (ok, value): (bool, Value),
        script: &str,
    ) -> Result<Reply, ModelError> {
        if ok {
            return convert::from_lua(&value);
        }
        let Value::Table(error) = value else {
            return Err(ModelError::Lua(format!(
                "the error handler returned a {}",
                value.type_name()
            )));
        };
        let text = |field: &str| -> Result<Option<String>, ModelError> {
            Ok(match error.get::<Value>(field)? {
                Value::String(s) => Some(s.to_string_lossy()),
                Value::Integer(n) => Some(n.to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
        };
        let mut message = text("err")?.unwrap_or_else(|| "(null)".to_owned());
        if let (Some(source), Some(line)) = (text("source")?, text("line")?) {
            message.push_str(&format!(" script: {script}, on {source}:{line}."));
        }
        Ok(Reply::Error(message))
    }
}

/// Runs `redis.call`'s arguments: the reply as a Lua value, or the error table; a failure
/// of the model raises (and is kept in `failure`).
fn execute(
    lua: &Lua,
    args: &MultiValue,
    call: &RefCell<Option<CallState>>,
    failure: &RefCell<Option<ModelError>>,
) -> mlua::Result<Result<Value, Table>> {
    let argv = match convert::argv(args) {
        Ok(argv) => argv,
        Err(message) => {
            let message = format!("ERR {message}");
            return Ok(Err(convert::error_table(lua, &message, false)?));
        }
    };
    let outcome = {
        let mut guard = call.borrow_mut();
        let Some(state) = guard.as_mut() else {
            return Err(mlua::Error::runtime("redis.call outside a call"));
        };
        run_from_script(state, &argv)
    };
    match outcome {
        Ok(Reply::Error(message)) => Ok(Err(convert::error_table(lua, &message, true)?)),
        Ok(reply) => Ok(Ok(convert::to_lua(lua, &reply)?)),
        Err(error) => {
            let message = error.to_string();
            failure.borrow_mut().get_or_insert(error);
            Err(mlua::Error::runtime(message))
        }
    }
}
