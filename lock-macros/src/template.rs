//! The key template grammar at compile time, resolved against the function's parameters.
//!
//! The grammar is lock-core's (`lock_core::KeyTemplate`, whose docs state it and argue why
//! rendering is injective), checked here so that a bad template fails the build instead of
//! the first call. A proc-macro cannot call lock-core (lock-core depends on this crate), so
//! `split` is a copy of its parser; the tests run both on the same templates.
//!
//! The first segment of a path names a binding of the function: a parameter, a name bound
//! inside a parameter's pattern (`Path(id): Path<u64>`), or `self`. The other segments are
//! field names or tuple indices (`<order.id>`, `<pair.0>`).

use std::fmt;

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::{FnArg, Ident, LitStr, Member, Pat, Token};

/// One binding the function's parameters introduce.
#[derive(Clone)]
enum Binding {
    /// A name bound by a parameter's pattern.
    Ident(Ident),
    /// The method receiver.
    SelfValue(Token![self]),
}

/// The names the function's parameters bind, in order.
pub(crate) struct Params(Vec<(String, Binding)>);

impl Params {
    /// Collects the bindings of `inputs`, including those inside patterns.
    pub(crate) fn collect<'a>(inputs: impl IntoIterator<Item = &'a FnArg>) -> Self {
        let mut params = Vec::new();
        for input in inputs {
            match input {
                FnArg::Receiver(receiver) => {
                    params.push(("self".to_owned(), Binding::SelfValue(receiver.self_token)));
                }
                FnArg::Typed(typed) => collect_pat(&typed.pat, &mut params),
            }
        }
        Self(params)
    }

    fn get(&self, name: &str) -> Option<&Binding> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, b)| b)
    }

    /// The parameter nearest to a misspelled `name`: at most a third of its letters apart
    /// (at least one), the nearest first.
    fn nearest(&self, name: &str) -> Option<&str> {
        let bound = (name.chars().count() / 3).max(1);
        self.0
            .iter()
            .map(|(n, _)| (edit_distance(n, name), n.as_str()))
            .filter(|(d, _)| *d <= bound)
            .min_by_key(|(d, _)| *d)
            .map(|(_, n)| n)
    }

    /// "`id`, `app`", for messages.
    fn list(&self) -> String {
        self.0
            .iter()
            .map(|(n, _)| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn collect_pat(pat: &Pat, out: &mut Vec<(String, Binding)>) {
    match pat {
        Pat::Ident(p) => {
            out.push((p.ident.unraw().to_string(), Binding::Ident(p.ident.clone())));
            if let Some((_, sub)) = &p.subpat {
                collect_pat(sub, out);
            }
        }
        Pat::Tuple(p) => p.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::TupleStruct(p) => p.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::Struct(p) => p.fields.iter().for_each(|f| collect_pat(&f.pat, out)),
        Pat::Slice(p) => p.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::Reference(p) => collect_pat(&p.pat, out),
        Pat::Paren(p) => collect_pat(&p.pat, out),
        Pat::Type(p) => collect_pat(&p.pat, out),
        // Every alternative binds the same names.
        Pat::Or(p) => {
            if let Some(first) = p.cases.first() {
                collect_pat(first, out);
            }
        }
        _ => {}
    }
}

/// A placeholder resolved to a binding and its field path.
struct Value {
    root: Binding,
    fields: Vec<Member>,
}

enum Part {
    Literal(String),
    Value(Value),
}

/// A parsed key template whose placeholders all name bindings of the function.
pub(crate) struct Template {
    parts: Vec<Part>,
}

/// A template error on the literal, with a hint.
fn error(lit: &LitStr, message: impl fmt::Display) -> syn::Error {
    syn::Error::new(lit.span(), message)
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

/// True for characters that separate two placeholders: those no encoded value contains
/// (values keep letters, digits, `-`, `.`, `_` and `~`, and write the rest as `%XX`).
fn is_separator(c: char) -> bool {
    !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%'))
}

/// The grammar's pieces before resolution: literals and placeholder paths.
#[derive(Debug, PartialEq, Eq)]
enum RawPart {
    Literal(String),
    Value(String),
}

/// Why a template was rejected: the cases of `lock_core::TemplateError`.
#[derive(Debug, PartialEq, Eq)]
enum GrammarError {
    Empty,
    Unclosed { at: usize },
    BadPlaceholder(String),
    Ambiguous { first: String, second: String },
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(
                f,
                "the key is empty: write the lock's name, e.g. `key = \"item_<id>\"`"
            ),
            Self::Unclosed { at } => write!(
                f,
                "unclosed `<` at byte {at} of the key: close the placeholder with `>`, \
                 or write `<<` for a literal `<`"
            ),
            Self::BadPlaceholder(path) => write!(
                f,
                "bad placeholder `<{path}>` in the key: name a parameter, optionally followed \
                 by fields, such as `<id>` or `<order.id>` (write `<<` for a literal `<`)"
            ),
            Self::Ambiguous { first, second } => write!(
                f,
                "placeholders `<{first}>` and `<{second}>` must be separated by a character \
                 such as `:` or `/`: values are encoded with letters, digits, `-`, `.`, `_`, \
                 `~` and `%`, so without one two different values could give the same lock name"
            ),
        }
    }
}

/// Splits `template` into literal text and placeholder paths, checking the grammar.
fn split(template: &str) -> Result<Vec<RawPart>, GrammarError> {
    if template.is_empty() {
        return Err(GrammarError::Empty);
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
        let close = rest.find('>').ok_or(GrammarError::Unclosed { at })?;
        let path = &rest[..close];
        if !is_valid_path(path) {
            return Err(GrammarError::BadPlaceholder(path.to_owned()));
        }
        if !literal.is_empty() {
            parts.push(RawPart::Literal(std::mem::take(&mut literal)));
        }
        parts.push(RawPart::Value(path.to_owned()));
        rest = &rest[close + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(RawPart::Literal(literal));
    }
    check_separated(&parts)?;
    Ok(parts)
}

/// Two placeholders need a separator between them, or names could collide.
fn check_separated(parts: &[RawPart]) -> Result<(), GrammarError> {
    let mut previous: Option<&str> = None;
    let mut separated = true;
    for part in parts {
        match part {
            RawPart::Literal(text) => separated |= text.chars().any(is_separator),
            RawPart::Value(path) => {
                if let (Some(first), false) = (previous, separated) {
                    return Err(GrammarError::Ambiguous {
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

impl Template {
    /// Parses the template in `lit` and resolves its placeholders against `params`.
    pub(crate) fn parse(lit: &LitStr, params: &Params) -> syn::Result<Self> {
        let raw = split(&lit.value()).map_err(|e| error(lit, e))?;
        let parts = raw
            .into_iter()
            .map(|part| match part {
                RawPart::Literal(text) => Ok(Part::Literal(text)),
                RawPart::Value(path) => resolve(lit, &path, params).map(Part::Value),
            })
            .collect::<syn::Result<_>>()?;
        Ok(Self { parts })
    }

    /// The expression that builds the lock name, starting from `builder`
    /// (`KeyBuilder::new()`); values are borrowed, so it runs before the body takes them.
    pub(crate) fn build(&self, builder: TokenStream, lit: &LitStr) -> TokenStream {
        let span = lit.span();
        let steps = self.parts.iter().map(|part| match part {
            Part::Literal(text) => quote!(.literal(#text)),
            Part::Value(value) => {
                // Hygiene of the binding, location of the literal: a missing `Display` impl
                // is reported on the key.
                let root = match &value.root {
                    Binding::Ident(ident) => {
                        let mut ident = ident.clone();
                        ident.set_span(ident.span().located_at(span));
                        ident.into_token_stream()
                    }
                    Binding::SelfValue(token) => {
                        let token = Token![self](token.span.located_at(span));
                        token.into_token_stream()
                    }
                };
                let fields = value.fields.iter();
                quote::quote_spanned!(span=> .value(&#root #(.#fields)*))
            }
        });
        quote!(#builder #(#steps)* .finish())
    }
}

/// Resolves `path` to a binding of the function and its fields.
fn resolve(lit: &LitStr, path: &str, params: &Params) -> syn::Result<Value> {
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let Some(root) = params.get(first) else {
        let known = if params.0.is_empty() {
            "the function has no parameters".to_owned()
        } else {
            format!("the parameters are {}", params.list())
        };
        let what = if first == "self" {
            "the function has no `self` parameter".to_owned()
        } else {
            format!("the function has no parameter `{first}`")
        };
        // As template text: the rest of the path is kept (`<app.regionn>` → `<app.region>`
        // would need the struct's fields, which a macro cannot see; parameters it can).
        let hint = match params.nearest(first) {
            Some(near) => format!("did you mean `<{near}{}>`? ({known})", &path[first.len()..]),
            None => known,
        };
        return Err(error(
            lit,
            format!("unknown placeholder `<{path}>` in the key: {what}; {hint}"),
        ));
    };
    let fields = segments
        .map(|segment| {
            if segment.bytes().all(|b| b.is_ascii_digit()) {
                return segment
                    .parse::<u32>()
                    .map(|index| {
                        Member::Unnamed(syn::Index {
                            index,
                            span: lit.span(),
                        })
                    })
                    .map_err(|_| error(lit, format!("tuple index `{segment}` is too large")));
            }
            syn::parse_str::<Ident>(segment)
                .ok()
                .filter(|_| !segment.starts_with(|c: char| c.is_ascii_digit()))
                .map(|ident| {
                    Member::Named(Ident::new(
                        &ident.to_string(),
                        Span::call_site().located_at(lit.span()),
                    ))
                })
                .ok_or_else(|| {
                    error(
                        lit,
                        format!(
                            "placeholder `<{path}>`: `{segment}` is not a field name \
                             (fields are Rust identifiers or tuple indices like `0`)"
                        ),
                    )
                })
        })
        .collect::<syn::Result<_>>()?;
    Ok(Value {
        root: root.clone(),
        fields,
    })
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("item_id", "item_idd"), 1);
        assert_eq!(edit_distance("region", "regoin"), 2);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("id", "id"), 0);
    }

    /// What lock-core makes of `template`, in this module's terms: the pieces (a template
    /// rendered with each value equal to its path tells literals and values apart, as
    /// values are encoded and `<`, `>` are not kept by encoding), or the error.
    fn lock_core_split(template: &str) -> Result<(Vec<String>, String), GrammarError> {
        use lock_core::{KeyTemplate, TemplateError};
        match KeyTemplate::parse(template) {
            Ok(t) => {
                let paths = t.placeholders().map(str::to_owned).collect();
                let name = t.render(|path| Ok::<_, ()>(format!("<{path}>"))).unwrap();
                Ok((paths, String::from_utf8(name.as_bytes().to_vec()).unwrap()))
            }
            Err(TemplateError::Empty) => Err(GrammarError::Empty),
            Err(TemplateError::Unclosed { at, .. }) => Err(GrammarError::Unclosed { at }),
            Err(TemplateError::BadPlaceholder { placeholder, .. }) => {
                Err(GrammarError::BadPlaceholder(placeholder))
            }
            Err(TemplateError::Ambiguous { first, second, .. }) => {
                Err(GrammarError::Ambiguous { first, second })
            }
            Err(other) => panic!("a lock-core template error this copy does not know: {other}"),
        }
    }

    /// The same, from this module's parser.
    fn our_split(template: &str) -> Result<(Vec<String>, String), GrammarError> {
        let mut paths = Vec::new();
        let mut name = String::new();
        for part in split(template)? {
            match part {
                RawPart::Literal(text) => name.push_str(&text),
                RawPart::Value(path) => {
                    lock_core::encode_value(&mut name, &format!("<{path}>"));
                    paths.push(path);
                }
            }
        }
        Ok((paths, name))
    }

    /// The two copies of the grammar agree: the same templates accepted, with the same
    /// placeholders and literals, and the same rejected, for the same reason.
    #[test]
    fn grammar_matches_lock_core() {
        let table = [
            "item_<id>",
            "a<<b<order.id>:<header.x-tenant>",
            "a>b",
            "<<",
            "<<<a>>",
            "<a-b.0>:<_>",
            "",
            "a<id",
            "<a>:<b",
            "<>",
            "<a b>",
            "<a.>",
            "<.a>",
            "<a..b>",
            "<é>",
            "<a<b>",
            "<a>_<b>",
            "<a><b>",
            "<a>/<b>",
            "<a>x:<b>",
            "<a>%<b>",
            "<a>%25<b>",
            "<a>%:<b>",
            "<a>~.-_<b>",
            "<a>é<b>",
            "<a><<<b>",
            "<a>:<b>%<c>",
            "x<a>:<b>_y",
        ];
        // Every ASCII character, and a few others, between two placeholders (doubled, so
        // that `<` is the escape `<<`).
        let between = (0..=0x7f_u8)
            .map(char::from)
            .chain(['é', '\u{7ff}', '\u{ffff}', '\u{10ffff}'])
            .map(|c| format!("<a>{c}{c}<b>"));
        let (mut accepted, mut total) = (0, 0);
        for template in table.map(str::to_owned).into_iter().chain(between) {
            let ours = our_split(&template);
            assert_eq!(ours, lock_core_split(&template), "{template:?}");
            accepted += usize::from(ours.is_ok());
            total += 1;
        }
        assert!(0 < accepted && accepted < total, "{accepted} of {total}");
        assert_eq!(
            split("a<<b<order.id>:<header.x-tenant>").unwrap(),
            [
                RawPart::Literal("a<b".into()),
                RawPart::Value("order.id".into()),
                RawPart::Literal(":".into()),
                RawPart::Value("header.x-tenant".into()),
            ]
        );
    }

    #[test]
    fn grammar_errors_say_what_to_write() {
        let message = |template: &str| split(template).unwrap_err().to_string();
        assert!(message("").contains("`key = \"item_<id>\"`"));
        assert!(message("a<id").contains("unclosed `<` at byte 1"));
        assert!(message("<a b>").contains("bad placeholder `<a b>`"));
        let ambiguous = message("<a>%<b>");
        assert!(
            ambiguous.contains("`<a>` and `<b>`") && ambiguous.contains("`%`"),
            "{ambiguous}"
        );
    }

    fn params(sig: &str) -> Params {
        let f: syn::ItemFn = syn::parse_str(&format!("{sig} {{}}")).unwrap();
        Params::collect(&f.sig.inputs)
    }

    #[test]
    fn pattern_bindings_count_as_parameters() {
        let p = params(
            "async fn f(&self, Path((shop, item)): Path<(u32, u32)>, State(app): State<App>, \
             Point { x, y: r#type }: Point, (a, _): (u8, u8), ref_id @ _: u8)",
        );
        let names: Vec<_> = p.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["self", "shop", "item", "app", "x", "type", "a", "ref_id"]
        );
    }

    #[test]
    fn resolution_errors_name_the_parameters() {
        let p = params("async fn f(id: u64, order: Order)");
        let lit: LitStr = syn::parse_quote!("x");
        let err = resolve(&lit, "idd", &p).err().unwrap().to_string();
        assert!(
            err.contains("no parameter `idd`") && err.contains("`id`, `order`"),
            "{err}"
        );
        let err = resolve(&lit, "self.a", &p).err().unwrap().to_string();
        assert!(err.contains("no `self` parameter"), "{err}");
        let err = resolve(&lit, "order.x-y", &p).err().unwrap().to_string();
        assert!(err.contains("`x-y` is not a field name"), "{err}");
        assert!(resolve(&lit, "order.id.0", &p).is_ok());
    }
}
