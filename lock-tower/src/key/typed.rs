//! Placeholder types: a request's text → the one text of the value the handler reads.
//!
//! `Path<u64>` reads `8`, `08`, `+8` and `%38` as the same 8; a lock on the raw text would
//! take four locks for one item. So every placeholder of a layer's template has a type
//! (`<id:u64>`, or [`parse_as`](crate::lock::LockLayerBuilder::parse_as)), the text is parsed as
//! the handler's extractor parses it (`FromStr`, as axum's `Path` and `Query` and
//! `serde_urlencoded` do), and the name holds the parsed value's `Display`. Raw text is
//! `<id:str>`: a choice written in the template.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Parses a placeholder's (already decoded) text into its canonical text, or says why the
/// value is not one (the reason, lowercase, ends up in the `400`).
pub(crate) type Canonical = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync + 'static>;

/// What a placeholder's text is, for the name.
#[derive(Clone)]
pub(crate) enum ValueType {
    /// `<id:str>`: the decoded text as it is.
    Text,
    /// A type whose values have one canonical text.
    Parsed(Canonical),
}

impl fmt::Debug for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Text => "Text",
            Self::Parsed(_) => "Parsed(..)",
        })
    }
}

/// The types a template may name, as written after `:`.
pub(crate) const BUILTIN: &[&str] = &[
    "str", "bool", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128",
    "isize", "uuid",
];

impl ValueType {
    /// The type written as `ty` in a template, or `None` for a name not in [`BUILTIN`].
    pub(crate) fn builtin(ty: &str) -> Option<Self> {
        Some(match ty {
            "str" => Self::Text,
            "bool" => parsed::<bool>("bool"),
            "u8" => parsed::<u8>("u8"),
            "u16" => parsed::<u16>("u16"),
            "u32" => parsed::<u32>("u32"),
            "u64" => parsed::<u64>("u64"),
            "u128" => parsed::<u128>("u128"),
            "usize" => parsed::<usize>("usize"),
            "i8" => parsed::<i8>("i8"),
            "i16" => parsed::<i16>("i16"),
            "i32" => parsed::<i32>("i32"),
            "i64" => parsed::<i64>("i64"),
            "i128" => parsed::<i128>("i128"),
            "isize" => parsed::<isize>("isize"),
            // `Uuid`'s `FromStr` (what its serde impl calls) takes hyphenated, simple, braced
            // and URN forms in either case; `Display` is lowercase hyphenated.
            "uuid" => parsed::<uuid::Uuid>("UUID"),
            _ => return None,
        })
    }

    /// The type `T`, named `what` in the `400`'s reason.
    pub(crate) fn of<T>(what: impl Into<String>) -> Self
    where
        T: FromStr + fmt::Display + 'static,
    {
        parsed::<T>(what)
    }

    /// The text for the name, or why `text` is no value of this type.
    pub(crate) fn canonical(&self, text: &str) -> Result<String, String> {
        match self {
            Self::Text => Ok(text.to_owned()),
            Self::Parsed(canonical) => canonical(text),
        }
    }
}

fn parsed<T>(what: impl Into<String>) -> ValueType
where
    T: FromStr + fmt::Display + 'static,
{
    let invalid = format!("is not a valid {}", what.into());
    ValueType::Parsed(Arc::new(move |text: &str| {
        text.parse::<T>()
            .map(|value| value.to_string())
            .map_err(|_| invalid.clone())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_is_known() {
        for ty in BUILTIN {
            assert!(ValueType::builtin(ty).is_some(), "{ty}");
        }
        assert!(ValueType::builtin("f64").is_none());
    }

    #[test]
    fn spellings_of_one_value_have_one_text() {
        let u64 = ValueType::builtin("u64").unwrap();
        for spelling in ["8", "08", "+8", "0008"] {
            assert_eq!(u64.canonical(spelling).unwrap(), "8", "{spelling}");
        }
        assert_eq!(u64.canonical("-8").unwrap_err(), "is not a valid u64");
        let i64 = ValueType::builtin("i64").unwrap();
        for spelling in ["-0", "+0", "000"] {
            assert_eq!(i64.canonical(spelling).unwrap(), "0", "{spelling}");
        }
        let uuid = ValueType::builtin("uuid").unwrap();
        let canonical = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        for spelling in [
            canonical,
            "67E55044-10B1-426F-9247-BB680E5FE0C8",
            "67e5504410b1426f9247bb680e5fe0c8",
            "{67e55044-10b1-426f-9247-bb680e5fe0c8}",
            "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
        ] {
            assert_eq!(uuid.canonical(spelling).unwrap(), canonical, "{spelling}");
        }
        assert_eq!(ValueType::Text.canonical("08").unwrap(), "08");
    }
}
