//! [`LoadedLibrary`]: a library text loaded into a Lua state of one runtime, its
//! callbacks, and the values its locals have in that state.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, HookTriggers, Table, Value, VmState};

use super::engine::{Engine, FUNCTION_CHUNK};
use super::Scalar;
use crate::bytecode;
use crate::call::CallState;
use crate::error::ModelError;
use crate::library::{self, digest, FunctionInfo, Library, LocalInfo};
use crate::reply::Reply;

/// A library in one runtime's Lua state.
pub(crate) struct LoadedLibrary {
    engine: Engine,
    callbacks: HashMap<String, Function>,
    /// The values the state cells have in this Lua state now.
    current: RefCell<Vec<Scalar>>,
    /// The lines run since the runtime last collected them (when it records coverage).
    pub(crate) lines: Option<Rc<RefCell<BTreeSet<u32>>>>,
}

/// The reason a text does not load: Redis' error reply, code first.
pub(crate) type LoadFailure = String;

/// Loads `source` as `FUNCTION LOAD` does into a new Lua state: its description and the
/// loaded state, or Redis' error reply (`Err(Ok(text))`), or a failure of the model.
pub(crate) fn load_library(
    source: &str,
    coverage: bool,
) -> Result<Result<(Library, LoadedLibrary), LoadFailure>, ModelError> {
    let (engine_name, name) = match library::metadata(source) {
        Ok(meta) => meta,
        Err(message) => return Ok(Err(format!("ERR {message}"))),
    };
    if !library::valid_name(&name) {
        return Ok(Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".to_owned()));
    }
    if !engine_name.eq_ignore_ascii_case("lua") {
        return Ok(Err(format!("ERR Engine '{engine_name}' not found")));
    }
    let engine = Engine::new()?;
    // The code from the shebang's line feed on, so that line numbers are the text's.
    let code = &source[source.find('\n').expect("metadata checked a line feed")..];
    let chunk = match engine.compile(code.as_bytes(), FUNCTION_CHUNK) {
        Ok(chunk) => chunk,
        Err(message) => return Ok(Err(format!("ERR Error compiling function: {message}"))),
    };
    let main = bytecode::parse(&chunk.dump(false)).map_err(ModelError::Lua)?;
    let code_lines = library::code_lines(&main, source);
    let (ok, names, callbacks, flags): (bool, Value, Value, Value) =
        engine.helper("load")?.call(chunk)?;
    if !ok {
        let message = match names {
            Value::String(s) => s.to_string_lossy(),
            _ => "(null)".to_owned(),
        };
        return Ok(Err(format!("ERR Error registering functions: {message}")));
    }
    let (Value::Table(names), Value::Table(callbacks), Value::Table(flags)) =
        (names, callbacks, flags)
    else {
        return Err(ModelError::Lua("the loader returned no tables".to_owned()));
    };
    let names: Vec<String> = names.sequence_values().collect::<mlua::Result<_>>()?;
    if names.is_empty() {
        return Ok(Err("ERR No functions registered".to_owned()));
    }
    let functions = names
        .iter()
        .zip(flags.sequence_values::<Table>())
        .map(|(name, flags)| {
            Ok(FunctionInfo {
                name: name.clone(),
                flags: flags?.sequence_values().collect::<mlua::Result<_>>()?,
            })
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let callback_list: Vec<Function> = callbacks.sequence_values().collect::<mlua::Result<_>>()?;
    let (local_names, local_paths): (Vec<String>, Vec<String>) =
        engine.helper("setup_cells")?.call(callbacks)?;
    let locals = local_names
        .into_iter()
        .zip(local_paths)
        .map(|(name, path)| LocalInfo { name, path })
        .collect::<Vec<_>>();
    let mut loaded = LoadedLibrary {
        engine,
        callbacks: names.iter().cloned().zip(callback_list).collect(),
        current: RefCell::new(Vec::new()),
        lines: None,
    };
    let initial = loaded.read_locals(&locals)?;
    *loaded.current.borrow_mut() = initial.clone();
    if coverage {
        loaded.record_lines()?;
    }
    let library = Library {
        name,
        source: Arc::from(source),
        digest: digest(source),
        functions,
        locals,
        initial,
        code_lines,
    };
    Ok(Ok((library, loaded)))
}

impl LoadedLibrary {
    /// Turns on the line hook: every line of the library's chunk that runs is recorded.
    fn record_lines(&mut self) -> Result<(), ModelError> {
        let lines = Rc::new(RefCell::new(BTreeSet::new()));
        let sink = Rc::clone(&lines);
        self.engine
            .lua
            .set_hook(HookTriggers::EVERY_LINE, move |_, debug| {
                if debug.source().source.as_deref() == Some(FUNCTION_CHUNK) {
                    if let Some(line) = debug.current_line() {
                        sink.borrow_mut().insert(line as u32);
                    }
                }
                Ok(VmState::Continue)
            })?;
        self.lines = Some(lines);
        Ok(())
    }

    /// The values the state cells have now.
    fn read_locals(&self, locals: &[LocalInfo]) -> Result<Vec<Scalar>, ModelError> {
        let values: Table = self.engine.helper("read_state")?.call(())?;
        locals
            .iter()
            .enumerate()
            .map(|(i, local)| Scalar::of(&values.raw_get::<Value>(i + 1)?, &local.path))
            .collect()
    }

    /// Sets the state cells to `wanted` where they differ.
    fn write_locals(&self, wanted: &[Scalar]) -> Result<(), ModelError> {
        let mut current = self.current.borrow_mut();
        let write = self.engine.helper("write_state")?;
        for (i, (now, want)) in current.iter_mut().zip(wanted).enumerate() {
            if now != want {
                write.call::<()>((i + 1, want.to_lua(&self.engine.lua)?))?;
                *now = want.clone();
            }
        }
        Ok(())
    }

    /// Runs function `name` of `library` on `state` with its locals set to `locals` (the
    /// node's values): the data back, and the reply with the locals' values after the call,
    /// or the model's failure.
    pub(crate) fn call(
        &self,
        library: &Library,
        name: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        state: CallState,
        locals: &[Scalar],
    ) -> (CallState, Result<(Reply, Vec<Scalar>), ModelError>) {
        let Some(callback) = self.callbacks.get(name) else {
            let failure = ModelError::Inconsistent {
                library: library.name.clone(),
                what: format!("function `{name}` is not registered in this runtime"),
            };
            return (state, Err(failure));
        };
        if let Err(failure) = self.write_locals(locals) {
            return (state, Err(failure));
        }
        let (state, result) = self.engine.with_call(state, || {
            let keys = self.engine.strings(keys)?;
            let args = self.engine.strings(args)?;
            let run = self.engine.helper("run")?;
            Ok(run.call::<(bool, Value)>((callback, keys, args))?)
        });
        let outcome = result.and_then(|result| {
            let reply = self.engine.reply_of(result, name)?;
            let changed: Option<String> = self.engine.helper("check_constants")?.call(())?;
            if let Some(path) = changed {
                return Err(ModelError::ConstantChanged {
                    function: name.to_owned(),
                    path,
                });
            }
            let after = self.read_locals(&library.locals)?;
            *self.current.borrow_mut() = after.clone();
            Ok((reply, after))
        });
        (state, outcome)
    }
}
