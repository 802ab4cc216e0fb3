//! The code lines of a library: every line holding a Lua 5.1 instruction that can run,
//! read from the compiled chunk (`string.dump`'s format, lundump.c) so that nested
//! functions are found whether or not they ever ran. Dead instructions the compiler emits
//! (a function's closing `return` after an explicit one, the jump over an `else` after a
//! `return`) are left out, so that a line is listed only if some call could reach it.

use std::collections::BTreeSet;

/// One compiled function (a prototype).
#[derive(Debug)]
pub(crate) struct Proto {
    /// The line of its `function` keyword (0 for the main chunk).
    pub(crate) line_defined: u32,
    /// Its instructions.
    code: Vec<u32>,
    /// The line of each instruction.
    lines: Vec<u32>,
    /// Its upvalue count (a `CLOSURE` of it is followed by that many pseudo-instructions).
    upvalues: u8,
    /// The functions defined in it.
    pub(crate) children: Vec<Proto>,
}

/// Reads a dump made on this machine (little-endian, 4-byte int, 8-byte size_t).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("dump truncated at byte {}", self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn int(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn size(&mut self) -> Result<usize, String> {
        let n = u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        usize::try_from(n).map_err(|e| e.to_string())
    }

    fn string(&mut self) -> Result<(), String> {
        let n = self.size()?;
        self.take(n)?;
        Ok(())
    }

    fn count(&mut self) -> Result<usize, String> {
        Ok(self.int()? as usize)
    }

    fn function(&mut self) -> Result<Proto, String> {
        self.string()?;
        let line_defined = self.int()?;
        let _last_line = self.int()?;
        let upvalues = self.byte()?;
        self.take(3)?; // numparams, is_vararg, maxstacksize
        let code = (0..self.count()?)
            .map(|_| self.int())
            .collect::<Result<Vec<_>, _>>()?;
        for _ in 0..self.count()? {
            match self.byte()? {
                0 => {}
                1 => {
                    self.byte()?;
                }
                3 => {
                    self.take(8)?;
                }
                4 => self.string()?,
                other => return Err(format!("unknown constant type {other}")),
            }
        }
        let children = (0..self.count()?)
            .map(|_| self.function())
            .collect::<Result<Vec<_>, _>>()?;
        let lines = (0..self.count()?)
            .map(|_| self.int())
            .collect::<Result<Vec<_>, _>>()?;
        for _ in 0..self.count()? {
            self.string()?;
            self.take(8)?;
        }
        for _ in 0..self.count()? {
            self.string()?;
        }
        Ok(Proto {
            line_defined,
            code,
            lines,
            upvalues,
            children,
        })
    }
}

/// The prototype tree of a Lua 5.1 dump (`Function::dump(false)`).
pub(crate) fn parse(dump: &[u8]) -> Result<Proto, String> {
    const HEADER: [u8; 12] = [0x1b, b'L', b'u', b'a', 0x51, 0, 1, 4, 8, 4, 8, 0];
    if dump.get(..12) != Some(&HEADER[..]) {
        return Err("not a Lua 5.1 dump of this machine's layout".to_owned());
    }
    Reader {
        bytes: dump,
        at: 12,
    }
    .function()
}

// Lua 5.1's opcodes that change the flow (lopcodes.h).
const LOADBOOL: u32 = 2;
const JMP: u32 = 22;
const EQ: u32 = 23;
const LT: u32 = 24;
const LE: u32 = 25;
const TEST: u32 = 26;
const TESTSET: u32 = 27;
const RETURN: u32 = 30;
const FORLOOP: u32 = 31;
const FORPREP: u32 = 32;
const TFORLOOP: u32 = 33;
const SETLIST: u32 = 34;
const CLOSURE: u32 = 36;

/// Where control can go after the instruction at `pc`.
fn successors(proto: &Proto, pc: usize) -> Vec<usize> {
    let i = proto.code[pc];
    let op = i & 0x3f;
    let c = (i >> 14) & 0x1ff;
    let bx = (i >> 14) as i64;
    let jump = |pc: usize| (pc as i64 + 1 + bx - 131_071) as usize;
    match op {
        RETURN => vec![],
        JMP => vec![jump(pc)],
        FORLOOP => vec![jump(pc), pc + 1],
        FORPREP => vec![jump(pc)],
        EQ | LT | LE | TEST | TESTSET | TFORLOOP => vec![pc + 1, pc + 2],
        LOADBOOL if c != 0 => vec![pc + 2],
        SETLIST if c == 0 => vec![pc + 2],
        CLOSURE => {
            let child = &proto.children[bx as usize];
            vec![pc + 1 + usize::from(child.upvalues)]
        }
        _ => vec![pc + 1],
    }
}

/// The lines of `proto`'s instructions that can run (reachable from its entry).
pub(crate) fn reachable_lines(proto: &Proto) -> BTreeSet<u32> {
    let mut seen = vec![false; proto.code.len()];
    let mut stack = vec![0];
    let mut lines = BTreeSet::new();
    while let Some(pc) = stack.pop() {
        if pc >= proto.code.len() || seen[pc] {
            continue;
        }
        seen[pc] = true;
        lines.insert(proto.lines[pc]);
        stack.extend(successors(proto, pc));
    }
    lines
}
