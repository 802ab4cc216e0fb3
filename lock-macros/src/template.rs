//! The key template grammar at compile time, resolved against the function's parameters.
//!
//! The grammar is the `lock-template` crate's (whose docs state it and argue why rendering
//! is injective), the one lock-core parses with too, checked here so that a bad template
//! fails the build instead of the first call.
//!
//! The first segment of a path names a binding of the function: a parameter, a name bound
//! inside a parameter's pattern (`Path(id): Path<u64>`), or `self`. The other segments are
//! field names or tuple indices (`<order.id>`, `<pair.0>`).

use std::fmt;

use lock_template::{Part as RawPart, TemplateError};
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

/// What to write instead, for each way the grammar rejects a template.
fn grammar_message(error: &TemplateError) -> String {
    match error {
        TemplateError::Empty => {
            "the key is empty: write the lock's name, e.g. `key = \"item_<id>\"`".to_owned()
        }
        TemplateError::Unclosed { at, .. } => format!(
            "unclosed `<` at byte {at} of the key: close the placeholder with `>`, \
             or write `<<` for a literal `<`"
        ),
        TemplateError::BadPlaceholder { placeholder, .. } => format!(
            "bad placeholder `<{placeholder}>` in the key: name a parameter, optionally followed \
             by fields, such as `<id>` or `<order.id>` (write `<<` for a literal `<`)"
        ),
        TemplateError::Ambiguous { first, second, .. } => format!(
            "placeholders `<{first}>` and `<{second}>` must be separated by a character \
             such as `:` or `/`: values are encoded with letters, digits, `-`, `.`, `_`, \
             `~` and `%`, so without one two different values could give the same lock name"
        ),
        other => other.to_string(),
    }
}

impl Template {
    /// Parses the template in `lit` and resolves its placeholders against `params`.
    pub(crate) fn parse(lit: &LitStr, params: &Params) -> syn::Result<Self> {
        let template = lock_template::Template::parse(&lit.value())
            .map_err(|e| error(lit, grammar_message(&e)))?;
        let parts = template
            .parts()
            .iter()
            .map(|part| match part {
                RawPart::Literal(text) => Ok(Part::Literal(text.clone())),
                RawPart::Value(placeholder) => {
                    untyped(lit, placeholder)?;
                    resolve(lit, placeholder.path(), params).map(Part::Value)
                }
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

/// A type in the template (`<id:u64>`) is lock-tower's, which parses request text: here the
/// value is already typed, and its `Display` is what the name holds.
fn untyped(lit: &LitStr, placeholder: &lock_template::Placeholder) -> syn::Result<()> {
    match placeholder.ty() {
        None => Ok(()),
        Some(ty) => Err(error(
            lit,
            format!(
                "placeholder `<{path}:{ty}>`: the macro takes the value's type from the \
                 function's parameter; write `<{path}>`",
                path = placeholder.path()
            ),
        )),
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

    #[test]
    fn grammar_errors_say_what_to_write() {
        let message = |template: &str| {
            grammar_message(&lock_template::Template::parse(template).unwrap_err())
        };
        assert!(message("").contains("`key = \"item_<id>\"`"));
        assert!(message("a<id").contains("unclosed `<` at byte 1"));
        assert!(message("<a b>").contains("bad placeholder `<a b>`"));
        let ambiguous = message("<a>%<b>");
        assert!(
            ambiguous.contains("`<a>` and `<b>`") && ambiguous.contains("`%`"),
            "{ambiguous}"
        );
    }

    #[test]
    fn typed_placeholders_are_the_layers() {
        let p = params("async fn f(id: u64)");
        let lit: LitStr = syn::parse_quote!("item_<id:u64>");
        let err = Template::parse(&lit, &p).err().unwrap().to_string();
        assert!(err.contains("write `<id>`"), "{err}");
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
