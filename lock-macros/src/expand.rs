//! Code generation: checks the function, then wraps its body in `LockRequest::run`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{ItemFn, ReturnType, Signature, Type};

use crate::attr::{Args, Config, OnLost};
use crate::template::Params;

/// The whole macro: parse → validate → expand. On any error the function is still emitted
/// as written, followed by the errors, so that IDEs and later errors keep working.
pub(crate) fn distributed_lock(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(func) => func,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "`#[distributed_lock]` goes on an `async fn` with a body",
            );
            return error_with(item, error);
        }
    };
    let mut errors = Vec::new();
    let args = syn::parse::Parser::parse2(
        |input: syn::parse::ParseStream<'_>| input.parse::<Args>(),
        attr,
    )
    .map_err(|e| errors.push(e))
    .ok();
    if let Err(e) = check_signature(&func.sig) {
        errors.push(e);
    }
    let params = Params::collect(&func.sig.inputs);
    let config = args.and_then(|args| args.validate(&params).map_err(|e| errors.push(e)).ok());
    match (
        config,
        errors.into_iter().reduce(|mut all, e| {
            all.combine(e);
            all
        }),
    ) {
        (Some(config), None) => expand(func, &config),
        (_, Some(error)) => error_with(item, error),
        (None, None) => unreachable!("a missing config always comes with an error"),
    }
}

fn error_with(item: TokenStream, error: syn::Error) -> TokenStream {
    let error = error.into_compile_error();
    quote!(#item #error)
}

const RETURN_HINT: &str = "`#[distributed_lock]` functions must return `Result<T, E>` with \
    `E: From<lock_core::LockError>`: when the lock cannot be taken or is lost, the function \
    returns `Err`";

/// `async`, not `const`, returning a `Result`.
fn check_signature(sig: &Signature) -> syn::Result<()> {
    if let Some(token) = sig.constness {
        return Err(syn::Error::new(
            token.span,
            "`#[distributed_lock]` cannot be applied to a `const fn`: taking a lock needs Redis \
             at run time; write an `async fn`",
        ));
    }
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span,
            "`#[distributed_lock]` can only be applied to an `async fn`: the lock is held across \
             the body's `.await`s; make the function `async`",
        ));
    }
    match &sig.output {
        ReturnType::Default => Err(syn::Error::new(
            sig.paren_token.span.close(),
            format!("{RETURN_HINT}; this function returns `()`"),
        )),
        ReturnType::Type(_, ty) if is_result(ty) => Ok(()),
        ReturnType::Type(_, ty) => Err(syn::Error::new_spanned(ty, RETURN_HINT)),
    }
}

/// `Result<…>`, `io::Result<…>`, `anyhow::Result<…>`, or an alias whose name ends in `Result`.
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Group(group) => is_result(&group.elem),
        Type::Paren(paren) => is_result(&paren.elem),
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident.to_string().ends_with("Result")),
        _ => false,
    }
}

/// The span of `E` in `Result<T, E>`, when written out.
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

/// True when `ty` mentions `impl Trait`, which a `let` cannot name.
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

fn expand(func: ItemFn, config: &Config) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let krate = &config.krate;
    let ReturnType::Type(_, ret_ty) = &sig.output else {
        unreachable!("checked by check_signature")
    };
    let ret_span = ret_ty.span();
    let err_span = error_type_span(ret_ty).unwrap_or(ret_span);
    // Generated names cannot clash with, or be seen by, the user's code.
    let name = format_ident!("__distlock_name", span = Span::mixed_site());
    let request = format_ident!("__distlock_request", span = Span::mixed_site());
    let output = format_ident!("__distlock_output", span = Span::mixed_site());
    // At the error type, so that a missing `From<LockError>` is reported there (a
    // mixed-site span would be reported on the attribute).
    let error = format_ident!("__distlock_error", span = err_span);
    let client = format_ident!("__distlock_client", span = Span::mixed_site());

    // Lock failures become the function's error; a missing `From` impl is reported on the
    // error type.
    let err = quote_spanned!(err_span=>
        ::core::result::Result::Err(::core::convert::From::from(#error))
    );

    let (key_lit, template) = &config.key;
    let name_expr = template.build(quote!(#krate::__private::KeyBuilder::new()), key_lit);

    let client_expr = match &config.client {
        Some(expr) => quote!((#expr)),
        None => quote! {
            match #krate::default_client() {
                ::core::result::Result::Ok(#client) => #client,
                #[allow(clippy::useless_conversion)]
                ::core::result::Result::Err(#error) => return #err,
            }
        },
    };
    let lease = config
        .lease
        .map(|(ms, span)| quote_spanned!(span=> .lease(::core::time::Duration::from_millis(#ms))));
    let wait = config
        .wait
        .map(|(ms, span)| quote_spanned!(span=> .wait(::core::time::Duration::from_millis(#ms))));
    let family = &config.key.0;
    let on_lost = match config.on_lost {
        OnLost::Abort => quote!(#krate::OnLost::Abort),
        OnLost::Continue => quote!(#krate::OnLost::Continue),
    };

    // The body runs as an `async move` block whose output is pinned to the declared return
    // type by a dead `return` (as tracing-attributes does), so a type error in the body is
    // reported on the user's code, not on the attribute, and `?` knows its target type.
    let body = if has_impl_trait(ret_ty) {
        quote!(async move #block)
    } else {
        let ret = format_ident!("__distlock_return", span = Span::mixed_site());
        let pin_type = quote_spanned! {ret_span=>
            #[allow(
                unknown_lints,
                unreachable_code,
                clippy::diverging_sub_expression,
                clippy::empty_loop,
                clippy::needless_return
            )]
            if false {
                let #ret: #ret_ty = loop {};
                return #ret;
            }
        };
        quote!(async move { #pin_type #block })
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            // The name borrows the parameters before the body takes them.
            let #name = #name_expr;
            let #request = #client_expr
                .lock(#name)
                #lease
                #wait
                // Metrics are labelled by the template, never by the rendered name.
                .family(#family)
                .on_lost(#on_lost);
            // Boxed: the caller's future stays small however deep locked calls nest.
            match ::std::boxed::Box::pin(#request.run(#body)).await {
                ::core::result::Result::Ok(#output) => #output,
                // `E` may be `LockError` itself.
                #[allow(clippy::useless_conversion)]
                ::core::result::Result::Err(#error) => #err,
            }
        }
    }
}
