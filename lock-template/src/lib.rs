//! The key-template grammar shared by `lock-core` (and so `lock-tower`) and `lock-macros`:
//! `"item_<id>"`, `"shop_<shop>:item_<item.id>"`, `"t_<header.x-tenant:u64>"`.
//!
//! - `<path>` is a placeholder; a path is one or more segments of letters, digits, `_` and
//!   `-`, joined by `.` (`<id>`, `<order.id>`, `<header.x-tenant>`);
//! - `<path:type>` gives the placeholder a type (letters, digits and `_`: `<id:u64>`,
//!   `<id:uuid>`, `<id:str>`); what a type means is up to the user of the template
//!   (`lock-tower` parses request values with it; the macro takes types from the function);
//! - `<<` is a literal `<`; any other character is literal;
//! - two placeholders must be separated by at least one *separator*: a character that is
//!   not a letter, digit, `-`, `.`, `_`, `~` or `%` (e.g. `:` or `/`), so that names stay
//!   unambiguous.
//!
//! Values are percent-encoded ([`encode_value`]), keeping only letters, digits, `-`, `.`,
//! `_` and `~`, so two different value tuples never render the same name (`"a:b" + "c"` and
//! `"a" + "b:c"` render `a%3Ab:c` and `a:b%3Ac`); why this holds is written at
//! `is_separator` below.
//!
//! ```
//! let t = lock_template::Template::parse("order_<shop>:<id:u64>").unwrap();
//! let paths: Vec<_> = t.placeholders().map(|p| (p.path(), p.ty())).collect();
//! assert_eq!(paths, [("shop", None), ("id", Some("u64"))]);
//! let name = t.render(|p| Ok::<_, ()>(if p.path() == "shop" { "a:b" } else { "7" }.to_owned()));
//! assert_eq!(name.unwrap(), "order_a%3Ab:7");
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

use std::fmt::{self, Write as _};

/// One placeholder: its path and optional type, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    path: String,
    ty: Option<String>,
}

impl Placeholder {
    /// The path, as written: `id`, `order.id`, `header.x-tenant`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The type after `:`, if one was written: `u64` for `<id:u64>`.
    pub fn ty(&self) -> Option<&str> {
        self.ty.as_deref()
    }
}

/// One piece of a parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Literal text (`<<` already turned into `<`).
    Literal(String),
    /// A placeholder.
    Value(Placeholder),
}

/// A parsed key template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

/// Why a template was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template is empty.
    Empty,
    /// A `<` has no matching `>`.
    Unclosed {
        /// The template.
        template: String,
        /// Byte offset of the `<`.
        at: usize,
    },
    /// A placeholder path (or its type) is empty or has a bad character.
    BadPlaceholder {
        /// The template.
        template: String,
        /// The placeholder text, type included.
        placeholder: String,
    },
    /// Two placeholders are not separated by a character that encoded values never contain.
    Ambiguous {
        /// The template.
        template: String,
        /// The first placeholder's path.
        first: String,
        /// The second placeholder's path.
        second: String,
    },
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("key template is empty"),
            Self::Unclosed { template, at } => write!(
                f,
                "key template {template:?}: `<` at byte {at} is not closed (write `<<` for a literal `<`)"
            ),
            Self::BadPlaceholder { template, placeholder } => write!(
                f,
                "key template {template:?}: bad placeholder `<{placeholder}>` (use letters, digits, `_`, `-`, joined by `.`, optionally followed by `:type`)"
            ),
            Self::Ambiguous { template, first, second } => write!(
                f,
                "key template {template:?}: `<{first}>` and `<{second}>` must be separated by a character such as `:` or `/` (not a letter, digit, `-`, `.`, `_`, `~` or `%`, which encoded values contain)"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}

impl Template {
    /// Parses `template`.
    ///
    /// # Errors
    /// A [`TemplateError`] naming what is wrong.
    pub fn parse(template: &str) -> Result<Self, TemplateError> {
        if template.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('<') {
            literal.push_str(&rest[..open]);
            rest = &rest[open + 1..];
            if let Some(after) = rest.strip_prefix('<') {
                literal.push('<');
                rest = after;
                continue;
            }
            let at = template.len() - rest.len() - 1;
            let close = rest.find('>').ok_or_else(|| TemplateError::Unclosed {
                template: template.to_owned(),
                at,
            })?;
            let placeholder =
                parse_placeholder(&rest[..close]).ok_or_else(|| TemplateError::BadPlaceholder {
                    template: template.to_owned(),
                    placeholder: rest[..close].to_owned(),
                })?;
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(Part::Value(placeholder));
            rest = &rest[close + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        check_separated(template, &parts)?;
        Ok(Self {
            source: template.to_owned(),
            parts,
        })
    }

    /// The pieces, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The placeholders, in order (a path written twice appears twice).
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.parts.iter().filter_map(|p| match p {
            Part::Value(placeholder) => Some(placeholder),
            Part::Literal(_) => None,
        })
    }

    /// Renders a name, asking `value` for each placeholder; values are percent-encoded.
    ///
    /// # Errors
    /// The first error `value` returns.
    pub fn render<E>(
        &self,
        mut value: impl FnMut(&Placeholder) -> Result<String, E>,
    ) -> Result<String, E> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Value(placeholder) => encode_value(&mut out, &value(placeholder)?),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// `path` or `path:type`, or `None` when either is malformed.
fn parse_placeholder(text: &str) -> Option<Placeholder> {
    let (path, ty) = match text.split_once(':') {
        Some((path, ty)) => (path, Some(ty)),
        None => (text, None),
    };
    let valid_type =
        |ty: &str| !ty.is_empty() && ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (is_valid_path(path) && ty.is_none_or(valid_type)).then(|| Placeholder {
        path: path.to_owned(),
        ty: ty.map(str::to_owned),
    })
}

fn is_valid_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('.').all(|segment| {
            !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

/// True for characters that values keep as they are.
fn is_unreserved(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')
}

/// True for characters that separate two placeholders: those no encoded value contains.
///
/// Why a separator between placeholders makes rendering injective (for one template):
/// - an encoded value is a word over E = {letters, digits, `-`, `.`, `_`, `~`, `%`}
///   ([`encode_value`] writes unreserved characters as they are and everything else as
///   `%XX`), and encoding is injective (percent-decoding undoes it);
/// - a template is `L0 <p1> L1 … <pn> Ln` where every literal between two placeholders
///   (`L1` … `Ln-1`) holds a character `s` outside E. Given a rendered name, strip the
///   fixed `L0`; the rest starts with `enc(v1) P s`, where `P` is the part of `L1` before
///   its first separator. `enc(v1)` and `P` hold no separator, so the first separator of
///   the rest is that `s`, at `len(enc(v1)) + len(P)`: the length of `enc(v1)` is read off
///   the name, hence `enc(v1)` and `v1`. Strip `enc(v1) L1` and repeat; the last value is
///   what lies between the prefix read so far and the fixed `Ln`.
///
/// So: an empty value is fine (its length, 0, is read off the same way); adjacent
/// placeholders have no literal between them and are rejected; so is a literal made only
/// of characters of E (`_`, `-`, `%`, `%25`), since encoding could have produced it — `%`
/// is the trap: `<a>%<b>` would render both `("", "25 ")` and `("%", "20")` as `%25%20`.
fn is_separator(c: char) -> bool {
    !is_unreserved(c) && c != '%'
}

fn check_separated(template: &str, parts: &[Part]) -> Result<(), TemplateError> {
    let mut previous: Option<&str> = None;
    let mut separated = true;
    for part in parts {
        match part {
            Part::Literal(text) => separated |= text.chars().any(is_separator),
            Part::Value(placeholder) => {
                if let (Some(first), false) = (previous, separated) {
                    return Err(TemplateError::Ambiguous {
                        template: template.to_owned(),
                        first: first.to_owned(),
                        second: placeholder.path.clone(),
                    });
                }
                previous = Some(&placeholder.path);
                separated = false;
            }
        }
    }
    Ok(())
}

/// Appends `value` percent-encoded: only letters, digits, `-`, `.`, `_`, `~` stay as they are.
pub fn encode_value(out: &mut String, value: &str) {
    for c in value.chars() {
        if is_unreserved(c) {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
}

#[cfg(test)]
mod tests;
