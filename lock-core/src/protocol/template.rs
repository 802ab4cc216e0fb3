//! Key templates: `"item_<id>"`, `"shop_<shop>:item_<item.id>"`, `"t_<header.x-tenant:u64>"`.
//!
//! The grammar lives in the `lock-template` crate, which `#[distributed_lock]` parses with
//! too: one grammar, one parser. This is its face in lock-core, rendering [`LockName`]s.

use std::fmt;

use lock_template::{Template, TemplateError};

use crate::protocol::name::LockName;

/// A parsed key template; the grammar is in the [`lock_template`] crate's docs.
///
/// ```
/// let t = lock_core::KeyTemplate::parse("order_<shop>:<id>").unwrap();
/// assert_eq!(t.placeholders().collect::<Vec<_>>(), ["shop", "id"]);
/// let name = t.render(|p| Ok::<_, ()>(if p == "shop" { "a:b" } else { "7" }.to_owned())).unwrap();
/// assert_eq!(name.as_bytes(), b"order_a%3Ab:7");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate(Template);

impl KeyTemplate {
    /// Parses `template`.
    ///
    /// # Errors
    /// A [`TemplateError`] naming what is wrong.
    pub fn parse(template: &str) -> Result<Self, TemplateError> {
        Template::parse(template).map(Self)
    }

    /// The placeholder paths, in order (`id` for `<id:u64>`).
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.0.placeholders().map(|p| p.path())
    }

    /// The placeholders with their types as written: `("id", Some("u64"))` for `<id:u64>`.
    pub fn typed_placeholders(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.0.placeholders().map(|p| (p.path(), p.ty()))
    }

    /// Renders a name, asking `value` for each placeholder path.
    ///
    /// # Errors
    /// The first error `value` returns.
    pub fn render<E>(
        &self,
        mut value: impl FnMut(&str) -> Result<String, E>,
    ) -> Result<LockName, E> {
        self.0.render(|p| value(p.path())).map(LockName::from)
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
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
        lock_template::encode_value(&mut self.0, &value.to_string());
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

    #[test]
    fn builder_matches_template() {
        let built = KeyBuilder::new().literal("item_").value(&7).finish();
        let rendered = KeyTemplate::parse("item_<id>")
            .unwrap()
            .render(|_| Ok::<_, ()>("7".to_owned()))
            .unwrap();
        assert_eq!(built.as_bytes(), rendered.as_bytes());
    }
}
