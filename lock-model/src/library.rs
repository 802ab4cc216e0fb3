//! [`Library`]: a Functions library as a node holds it — its text, name, functions and
//! flags, its locals' names and load-time values, and its code lines. Plain data, shared by
//! every node and worker thread that loaded the same text.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::bytecode::{reachable_lines, Proto};
use crate::shim::Scalar;

/// A registered function and its flags (`no-writes`, `allow-oom`…, lower case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name.
    pub name: String,
    /// Its flags, as registered.
    pub flags: Vec<String>,
}

impl FunctionInfo {
    /// True when registered `no-writes` (callable by `FCALL_RO`; refused writes).
    pub fn no_writes(&self) -> bool {
        self.flags.iter().any(|f| f == "no-writes")
    }
}

/// A library-level local that is part of a node's state: its name and where it was found
/// (the upvalue path from a registered callback, e.g. `#1>on_cluster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalInfo {
    /// The local's name.
    pub name: String,
    /// Its path from the first registered callback that reaches it.
    pub path: String,
}

/// A loaded library's description (see the module docs).
#[derive(Debug)]
pub struct Library {
    pub(crate) name: String,
    pub(crate) source: Arc<str>,
    pub(crate) digest: u64,
    pub(crate) functions: Vec<FunctionInfo>,
    pub(crate) locals: Vec<LocalInfo>,
    pub(crate) initial: Vec<Scalar>,
    /// Each code line and the function it is in.
    pub(crate) code_lines: BTreeMap<u32, String>,
}

impl Library {
    /// Its name (the shebang's `name=`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The text it was loaded from, byte for byte as `FUNCTION LOAD` got it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Its functions, in registration order.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.functions
    }

    /// The function `name`.
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The library-level locals carried as node state.
    pub fn locals(&self) -> &[LocalInfo] {
        &self.locals
    }

    /// Every line (1-based, of [`Self::source`]) inside a function that some call could
    /// run, with the name of the innermost `local function` holding it.
    pub fn code_lines(&self) -> &BTreeMap<u32, String> {
        &self.code_lines
    }

    /// The text of line `line` (1-based).
    pub fn line(&self, line: u32) -> &str {
        self.source
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .unwrap_or("")
    }

    /// True when both are the same text.
    pub(crate) fn same_text(&self, other: &Library) -> bool {
        self.digest == other.digest && self.source == other.source
    }
}

impl PartialEq for Library {
    fn eq(&self, other: &Self) -> bool {
        self.same_text(other)
    }
}

impl Eq for Library {}

impl Hash for Library {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

/// The digest of a library text (deterministic within a process).
pub(crate) fn digest(source: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    source.hash(&mut hasher);
    hasher.finish()
}

/// The metadata of a library text (`functionExtractLibMetaData`): its engine and name, or
/// the error text Redis replies (without the leading `ERR `).
pub(crate) fn metadata(source: &str) -> Result<(String, String), String> {
    if !source.starts_with("#!") {
        return Err("Missing library metadata".to_owned());
    }
    let Some((shebang, _)) = source.split_once('\n') else {
        return Err("Invalid library metadata".to_owned());
    };
    if shebang.contains(['"', '\'']) {
        return Err("Invalid library metadata (quoted shebang: not modelled)".to_owned());
    }
    let mut parts = shebang.split_ascii_whitespace();
    let engine = parts
        .next()
        .ok_or_else(|| "Invalid library metadata".to_owned())?[2..]
        .to_owned();
    let mut name = None;
    for part in parts {
        match part.get(..5) {
            Some(key) if key.eq_ignore_ascii_case("name=") => {
                if name.is_some() {
                    return Err(
                        "Invalid metadata value, name argument was given multiple times".to_owned(),
                    );
                }
                name = Some(part[5..].to_owned());
            }
            _ => return Err(format!("Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or_else(|| "Library name was not given".to_owned())?;
    Ok((engine, name))
}

/// True for a library or function name Redis accepts (`functionsVerifyName`).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Each code line of `main`'s functions and the innermost named function holding it.
pub(crate) fn code_lines(main: &Proto, source: &str) -> BTreeMap<u32, String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = BTreeMap::new();
    for child in &main.children {
        collect(child, "", &lines, &mut out);
    }
    out
}

fn collect(proto: &Proto, parent: &str, lines: &[&str], out: &mut BTreeMap<u32, String>) {
    let name = function_name(proto.line_defined, parent, lines);
    for line in reachable_lines(proto) {
        out.insert(line, name.clone());
    }
    for child in &proto.children {
        collect(child, &name, lines, out);
    }
}

/// The name a function is defined with on `line` (`local function f(` or `function f(`),
/// or, for an anonymous one, where it is within `parent`.
fn function_name(line: u32, parent: &str, lines: &[&str]) -> String {
    let text = lines
        .get(line.saturating_sub(1) as usize)
        .copied()
        .unwrap_or("");
    let named = text
        .find("function ")
        .map(|at| text[at + "function ".len()..].trim_start())
        .and_then(|rest| rest.split_once('('))
        .map(|(name, _)| name.trim())
        .filter(|name| !name.is_empty());
    match named {
        Some(name) => name.to_owned(),
        None if parent.is_empty() => format!("(anonymous function, line {line})"),
        None => format!("{parent} (anonymous function, line {line})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_reads_the_shebang_as_redis_does() {
        assert_eq!(
            metadata("#!lua name=lib_1\nreturn"),
            Ok(("lua".to_owned(), "lib_1".to_owned()))
        );
        assert_eq!(
            metadata("return"),
            Err("Missing library metadata".to_owned())
        );
        assert_eq!(
            metadata("#!lua name=x"),
            Err("Invalid library metadata".to_owned())
        );
        assert_eq!(
            metadata("#!lua\n"),
            Err("Library name was not given".to_owned())
        );
        assert_eq!(
            metadata("#!lua name=a foo=b\n"),
            Err("Invalid metadata value given: foo=b".to_owned())
        );
        assert!(valid_name("distlock_4") && !valid_name("a-b") && !valid_name(""));
    }
}
