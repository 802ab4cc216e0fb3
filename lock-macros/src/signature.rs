//! The function's signature: checked once, and kept as the facts the expansion needs.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{ReturnType, Signature, Type};

/// The declared return type of a function the attribute may wrap.
pub(crate) struct Output {
    /// The type as written.
    pub(crate) ty: Box<Type>,
    /// Where `E` of `Result<T, E>` is written, else the whole type: a missing
    /// `From<LockError>` is reported there.
    pub(crate) error_span: Span,
    /// The type mentions `impl Trait`, which a `let` cannot name.
    pub(crate) has_impl_trait: bool,
}

impl Output {
    /// Checks that `sig` is an `async fn`, not `const`, with a return type.
    ///
    /// Whether that type is a `Result` is left to the type checker (see `expand`): a name
    /// proves nothing (`type Response<T> = Result<T, ApiError>` is one, `struct
    /// FakeResult<T>` is not), and rustc's error then names the actual type.
    pub(crate) fn of(sig: &Signature) -> syn::Result<Self> {
        if let Some(token) = sig.constness {
            return Err(syn::Error::new(
                token.span,
                "`#[distributed_lock]` cannot be applied to a `const fn`: taking a lock needs \
                 Redis at run time; write an `async fn`",
            ));
        }
        if sig.asyncness.is_none() {
            return Err(syn::Error::new(
                sig.fn_token.span,
                "`#[distributed_lock]` can only be applied to an `async fn`: the lock is held \
                 across the body's `.await`s; make the function `async`",
            ));
        }
        match &sig.output {
            ReturnType::Default => Err(syn::Error::new(
                sig.paren_token.span.close(),
                format!("{RETURN_HINT}; this function returns `()`"),
            )),
            ReturnType::Type(_, ty) => Ok(Self {
                error_span: error_type_span(ty).unwrap_or_else(|| ty.span()),
                has_impl_trait: has_impl_trait(ty),
                ty: ty.clone(),
            }),
        }
    }
}

/// What a locked function must return, and why.
/// (The same words as `lock_core::__private::LockResult`'s diagnostic; the ui tests of both
/// errors keep them in step.)
pub(crate) const RETURN_HINT: &str = "`#[distributed_lock]` functions must return \
    `Result<T, E>` with `E: From<lock_core::LockError>`: when the lock cannot be taken or is \
    lost, the function returns `Err`";

/// The span of `E` in `Result<T, E>` (or any `Name<T, E>`), when written out.
fn error_type_span(ty: &Type) -> Option<Span> {
    match ty {
        Type::Group(group) => error_type_span(&group.elem),
        Type::Paren(paren) => error_type_span(&paren.elem),
        Type::Path(path) => match &path.path.segments.last()?.arguments {
            syn::PathArguments::AngleBracketed(args) => args
                .args
                .iter()
                .filter_map(|arg| match arg {
                    syn::GenericArgument::Type(ty) => Some(ty.span()),
                    _ => None,
                })
                .nth(1),
            _ => None,
        },
        _ => None,
    }
}

/// True when `ty` mentions `impl Trait`.
fn has_impl_trait(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
}
