//! Key templates: `"item_<id>"`, `"shop_<shop>:item_<item.id>"`.
//!
//! The grammar, shared by `#[distributed_lock]` and `lock-tower`:
//! - `<path>` is a placeholder; a path is one or more segments of letters, digits, `_` and
//!   `-`, joined by `.` (`<id>`, `<order.id>`, `<header.x-tenant>`);
//! - `<<` is a literal `<`; any other character is literal;
//! - two placeholders must be separated by at least one *separator*: a character that is
//!   not a letter, digit, `-`, `.`, `_`, `~` or `%` (e.g. `:` or `/`), so that names stay
//!   unambiguous.
//!
//! Values are percent-encoded, keeping only letters, digits, `-`, `.`, `_` and `~`, so two
//! different value tuples never render the same name (`"a:b" + "c"` and `"a" + "b:c"`
//! render `a%3Ab:c` and `a:b%3Ac`); why this holds is written at `is_separator` below.
//!
//! `lock-macros` keeps a copy of this grammar (a proc-macro cannot call this crate); its
//! tests check that both copies accept and reject the same templates.

use std::fmt::{self, Write as _};

use crate::protocol::name::LockName;

/// One piece of a parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Value(String),
}

/// A parsed key template.
///
/// ```
/// let t = lock_core::KeyTemplate::parse("order_<shop>:<id>").unwrap();
/// assert_eq!(t.placeholders().collect::<Vec<_>>(), ["shop", "id"]);
/// let name = t.render(|p| Ok::<_, ()>(if p == "shop" { "a:b" } else { "7" }.to_owned())).unwrap();
/// assert_eq!(name.as_bytes(), b"order_a%3Ab:7");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    source: String,
    parts: Vec<Part>,
}

/// Why a template was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template is empty.
    #[error("key template is empty")]
    Empty,
    /// A `<` has no matching `>`.
    #[error(
        "key template {template:?}: `<` at byte {at} is not closed (write `<<` for a literal `<`)"
    )]
    Unclosed {
        /// The template.
        template: String,
        /// Byte offset of the `<`.
        at: usize,
    },
    /// A placeholder path is empty or has a bad character.
    #[error("key template {template:?}: bad placeholder `<{placeholder}>` (use letters, digits, `_`, `-`, joined by `.`)")]
    BadPlaceholder {
        /// The template.
        template: String,
        /// The placeholder text.
        placeholder: String,
    },
    /// Two placeholders are not separated by a character that encoded values never contain.
    #[error("key template {template:?}: `<{first}>` and `<{second}>` must be separated by a character such as `:` or `/` (not a letter, digit, `-`, `.`, `_`, `~` or `%`, which encoded values contain)")]
    Ambiguous {
        /// The template.
        template: String,
        /// The first placeholder.
        first: String,
        /// The second placeholder.
        second: String,
    },
}

impl KeyTemplate {
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
            let path = &rest[..close];
            if !is_valid_path(path) {
                return Err(TemplateError::BadPlaceholder {
                    template: template.to_owned(),
                    placeholder: path.to_owned(),
                });
            }
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(Part::Value(path.to_owned()));
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

    /// The placeholder paths, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Value(path) => Some(path.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Renders a name, asking `value` for each placeholder path.
    ///
    /// # Errors
    /// The first error `value` returns.
    pub fn render<E>(
        &self,
        mut value: impl FnMut(&str) -> Result<String, E>,
    ) -> Result<LockName, E> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Value(path) => encode_value(&mut out, &value(path)?),
            }
        }
        Ok(LockName::from(out))
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
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
            Part::Value(path) => {
                if let (Some(first), false) = (previous, separated) {
                    return Err(TemplateError::Ambiguous {
                        template: template.to_owned(),
                        first: first.to_owned(),
                        second: path.clone(),
                    });
                }
                previous = Some(path);
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

/// Builds a name piece by piece; what `#[distributed_lock]` expands to.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct KeyBuilder(String);

impl KeyBuilder {
    /// An empty name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends literal template text.
    pub fn literal(&mut self, text: &str) -> &mut Self {
        self.0.push_str(text);
        self
    }

    /// Appends a value, formatted with `Display` and percent-encoded.
    pub fn value(&mut self, value: &dyn fmt::Display) -> &mut Self {
        encode_value(&mut self.0, &value.to_string());
        self
    }

    /// The finished name.
    pub fn finish(&mut self) -> LockName {
        LockName::from(std::mem::take(&mut self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &str, values: &[&str]) -> String {
        let mut values = values.iter();
        let name = KeyTemplate::parse(t)
            .unwrap()
            .render(|_| Ok::<_, ()>(values.next().unwrap().to_string()))
            .unwrap();
        String::from_utf8(name.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn placeholders_and_escapes() {
        let t = KeyTemplate::parse("a<<b<order.id>:<header.x-tenant>").unwrap();
        assert_eq!(
            t.placeholders().collect::<Vec<_>>(),
            ["order.id", "header.x-tenant"]
        );
        assert_eq!(render("a<<b<x>", &["1"]), "a<b1");
    }

    #[test]
    fn values_cannot_collide() {
        assert_ne!(
            render("<a>:<b>", &["x:y", "z"]),
            render("<a>:<b>", &["x", "y:z"])
        );
        assert_eq!(render("item_<id>", &["7"]), "item_7");
        assert_eq!(render("<a>", &["é /%"]), "%C3%A9%20%2F%25");
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(KeyTemplate::parse(""), Err(TemplateError::Empty));
        assert!(matches!(
            KeyTemplate::parse("a<id"),
            Err(TemplateError::Unclosed { at: 1, .. })
        ));
        assert!(matches!(
            KeyTemplate::parse("<>"),
            Err(TemplateError::BadPlaceholder { .. })
        ));
        assert!(matches!(
            KeyTemplate::parse("<a b>"),
            Err(TemplateError::BadPlaceholder { .. })
        ));
        let err = KeyTemplate::parse("<a>_<b>").unwrap_err();
        assert!(err.to_string().contains("`<a>` and `<b>`"), "{err}");
        assert!(KeyTemplate::parse("<a><b>").is_err());
        assert!(KeyTemplate::parse("<a>/<b>").is_ok());
    }

    /// Regression: `%` once counted as a separator, but encoded values contain it, so
    /// `<a>%<b>` gave `("", "25 ")` and `("%", "20")` the same name, `%25%20`.
    #[test]
    fn percent_does_not_separate_placeholders() {
        let joined = |a: &str, b: &str| {
            let mut out = String::new();
            encode_value(&mut out, a);
            out.push('%');
            encode_value(&mut out, b);
            out
        };
        assert_eq!(joined("", "25 "), "%25%20");
        assert_eq!(joined("%", "20"), "%25%20");
        for ambiguous in ["<a>%<b>", "<a>%25<b>", "<a>-%_<b>", "<a>~<b>", "x<a>.<b>y"] {
            assert!(
                matches!(
                    KeyTemplate::parse(ambiguous),
                    Err(TemplateError::Ambiguous { .. })
                ),
                "{ambiguous}"
            );
        }
        // Any character outside the encoded alphabet separates, wherever it is in the literal.
        for separated in [
            "<a>%:<b>",
            "<a>_/_<b>",
            "<a><<<b>",
            "<a>>%<b>",
            "<a>é<b>",
            "<a> <b>",
        ] {
            assert!(KeyTemplate::parse(separated).is_ok(), "{separated}");
        }
    }

    /// No character of an encoded value is a separator: what the injectivity argument at
    /// `is_separator` rests on.
    #[test]
    fn encoded_values_contain_no_separator() {
        let chars = (0..=0x7f_u32)
            .chain([0xe9, 0x7ff, 0x800, 0xffff, 0x1_0000, 0x10_ffff])
            .filter_map(char::from_u32);
        for c in chars {
            let mut out = String::new();
            encode_value(&mut out, &c.to_string());
            assert!(!out.chars().any(is_separator), "{c:?} encodes as {out:?}");
            assert_eq!(out == c.to_string(), is_unreserved(c), "{c:?}");
        }
    }

    /// For every accepted template, distinct value tuples built from tricky values (empty,
    /// `%`, escapes, separators, unicode) render distinct names.
    #[test]
    fn distinct_tuples_render_distinct_names() {
        const VALUES: [&str; 16] = [
            "", "%", "%25", "25 ", "20", "%2", "a", "a:b", ":", "/", "_", "a_b", "é", "<", " ",
            "%3A",
        ];
        let templates = [
            "<a>:<b>",
            "<a>/<b>:<c>",
            "x_<a>:_<b>_",
            "<a>%:<b>",
            "<a><<<b>",
            "<a>é<b>",
            "<a> <b>",
            "p<a>:%25:<b>%",
        ];
        for text in templates {
            let template = KeyTemplate::parse(text).unwrap();
            let arity = template.placeholders().count();
            let mut seen = std::collections::HashMap::new();
            let mut tuple = vec![0; arity];
            loop {
                let mut next = tuple.iter();
                let name = template
                    .render(|_| Ok::<_, ()>(VALUES[*next.next().unwrap()].to_owned()))
                    .unwrap();
                if let Some(other) = seen.insert(name.as_bytes().to_vec(), tuple.clone()) {
                    let values = |t: &[usize]| t.iter().map(|&i| VALUES[i]).collect::<Vec<_>>();
                    panic!(
                        "{text}: {:?} and {:?} render the same name {name}",
                        values(&other),
                        values(&tuple)
                    );
                }
                // The next tuple, counting in base `VALUES.len()`.
                let Some(i) = tuple.iter().rposition(|&v| v + 1 < VALUES.len()) else {
                    break;
                };
                tuple[i] += 1;
                tuple[i + 1..].fill(0);
            }
            assert_eq!(seen.len(), VALUES.len().pow(arity as u32), "{text}");
        }
    }

    #[test]
    fn builder_matches_template() {
        let built = KeyBuilder::new().literal("item_").value(&7).finish();
        assert_eq!(built.as_bytes(), render("item_<id>", &["7"]).as_bytes());
    }
}
