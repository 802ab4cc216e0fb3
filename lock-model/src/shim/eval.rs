//! [`EvalEngine`]: EVAL scripts (Redisson's), each compiled once, run with KEYS and ARGV.

use std::cell::RefCell;
use std::collections::HashMap;

use mlua::{Function, Value};

use super::engine::{Engine, SCRIPT_CHUNK};
use crate::call::CallState;
use crate::error::ModelError;
use crate::reply::Reply;

/// One runtime's Lua state for EVAL scripts. A script keeps no state between calls: its
/// globals are read-only and its locals live for one run.
pub(crate) struct EvalEngine {
    engine: Engine,
    scripts: RefCell<HashMap<Vec<u8>, Function>>,
}

impl EvalEngine {
    pub(crate) fn new() -> Result<Self, ModelError> {
        Ok(Self {
            engine: Engine::new()?,
            scripts: RefCell::new(HashMap::new()),
        })
    }

    /// Runs `script` as EVAL does on `state`.
    pub(crate) fn eval(
        &self,
        script: &[u8],
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        state: CallState,
    ) -> (CallState, Result<Reply, ModelError>) {
        if script.starts_with(b"#!") {
            let failure = ModelError::NotModelled("an EVAL script with a shebang".to_owned());
            return (state, Err(failure));
        }
        let compiled = self.scripts.borrow().get(script).cloned();
        let function = match compiled {
            Some(function) => function,
            None => match self.engine.compile(script, SCRIPT_CHUNK) {
                Ok(function) => {
                    self.scripts
                        .borrow_mut()
                        .insert(script.to_vec(), function.clone());
                    function
                }
                Err(message) => {
                    let reply = format!("ERR Error compiling script (new function): {message}");
                    return (state, Ok(Reply::Error(reply)));
                }
            },
        };
        let name = sha1_smol::Sha1::from(script).digest().to_string();
        self.engine.with_call(state, || {
            let keys = self.engine.strings(keys)?;
            let args = self.engine.strings(args)?;
            let result = self
                .engine
                .helper("eval")?
                .call::<(bool, Value)>((function, keys, args))?;
            self.engine.reply_of(result, &name)
        })
    }
}
