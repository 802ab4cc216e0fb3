//! Code generation: wraps the function's body in `LockRequest::run` (or
//! `MultiLockRequest::run` for `keys`).

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Expr, ItemFn};

use crate::attr::{Config, Hold, Kind, OnLost};
use crate::signature::Output;
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
    let config = Config::parse(attr, &Params::collect(&func.sig.inputs));
    match (config, Output::of(&func.sig)) {
        (Ok(config), Ok(output)) => expand(func, &config, &output),
        (Err(mut error), Err(more)) => {
            error.combine(more);
            error_with(item, error)
        }
        (Err(error), Ok(output)) => options_error(func, &output, error),
        (Ok(_), Err(error)) => error_with(item, error),
    }
}

/// Wrong options on a good signature: the errors, and the function as written, which
/// type-checks on its own — except a job's, whose body returns `Result<T, E>` for the
/// function's `Result<JobOutcome<T>, E>`. That body is checked at its own type behind
/// `unimplemented!()`, so that no follow-on type error hides the options error.
fn options_error(mut func: ItemFn, output: &Output, error: syn::Error) -> TokenStream {
    let error = error.into_compile_error();
    let Some(body_ty) = job_body_type(&output.ty) else {
        return quote!(#func #error);
    };
    let stmts = &func.block.stmts;
    let pin = pin_output(&body_ty, output.ty.span());
    func.block = syn::parse_quote!({
        let _ = async move {
            #pin
            #(#stmts)*
        };
        ::core::unimplemented!("the options of `#[distributed_lock]` are wrong")
    });
    quote!(#func #error)
}

/// A dead `return` of a `body_ty` value (as tracing-attributes does): pins an `async`
/// block's output to the type, so `?` knows its target and type errors land on the body.
fn pin_output(body_ty: &impl ToTokens, span: Span) -> TokenStream {
    let ret = format_ident!("__distlock_return", span = Span::mixed_site());
    quote_spanned! {span=>
        #[allow(
            unknown_lints,
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::empty_loop,
            clippy::needless_return
        )]
        if false {
            let #ret: #body_ty = loop {};
            return #ret;
        }
    }
}

/// A job's body type: the return type with its `JobOutcome<T>` argument replaced by `T`
/// (`Result<JobOutcome<T>, E>` → `Result<T, E>`); `None` for any other type.
fn job_body_type(ret: &syn::Type) -> Option<syn::Type> {
    let last_args = |ty: &mut syn::Type| match ty {
        syn::Type::Path(path) => match &mut path.path.segments.last_mut()?.arguments {
            syn::PathArguments::AngleBracketed(args) => Some(args.clone()),
            _ => None,
        },
        _ => None,
    };
    let mut body = ret.clone();
    let syn::Type::Path(path) = &mut body else {
        return None;
    };
    let syn::PathArguments::AngleBracketed(args) = &mut path.path.segments.last_mut()?.arguments
    else {
        return None;
    };
    let Some(syn::GenericArgument::Type(first)) = args.args.first_mut() else {
        return None;
    };
    let is_outcome = matches!(&*first, syn::Type::Path(p)
        if p.path.segments.last().is_some_and(|s| s.ident == "JobOutcome"));
    if !is_outcome {
        return None;
    }
    let inner = last_args(first)?;
    let Some(syn::GenericArgument::Type(value)) = inner.args.first() else {
        return None;
    };
    *first = value.clone();
    Some(body)
}

fn error_with(item: TokenStream, error: syn::Error) -> TokenStream {
    let error = error.into_compile_error();
    quote!(#item #error)
}

/// `&client` as the `&LockClient` argument of `LockClient::lock`, so that a client of the
/// wrong type is an error on the user's expression (and a type with a `lock` method of its
/// own, a `Mutex` say, is not picked by method resolution). References, `Arc`s and other
/// `Deref`s to a `LockClient` are deref-coerced.
///
/// Written `&*&(client)`: a `*` keeps the expected type `&LockClient` from reaching into the
/// expression, where an `if` or `match` whose arms are `&LockClient` would be checked
/// against `LockClient`. The invisible group keeps the expression's precedence, and the
/// tokens around it the expression's span, so errors underline the expression.
fn client_ref(expr: &Expr) -> TokenStream {
    let span = expr.span();
    let expr = Group::new(Delimiter::None, expr.to_token_stream());
    quote_spanned!(span=> &*&#expr)
}

fn expand(func: ItemFn, config: &Config, output: &Output) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let krate = &config.krate;
    let ret_ty = &output.ty;
    let ret_span = ret_ty.span();
    let err_span = output.error_span;
    // Generated names cannot clash with, or be seen by, the user's code.
    let name = format_ident!("__distlock_name", span = Span::mixed_site());
    let request = format_ident!("__distlock_request", span = Span::mixed_site());
    let ok = format_ident!("__distlock_ok", span = Span::mixed_site());
    // At the error type, so that a missing `From<LockError>` is reported there (a
    // mixed-site span would be reported on the attribute).
    let error = format_ident!("__distlock_error", span = err_span);
    let client = format_ident!("__distlock_client", span = Span::mixed_site());
    // Lock failures become the function's `Err` through `__private::LockResult`, which only
    // `Result` implements: any other return type is one error, on the type, saying what to
    // return. A missing `From` impl is reported on the error type.
    // `<_ as LockResult>::err(From::from(error))`: the call at the return type (rustc
    // underlines its first token), `From::from` at the error type.
    // With `map_err = f`: `f(error)`, at `f` (a wrong type is reported on it), through a
    // function whose bound gives a closure's parameter its type.
    let from = match &config.map_err {
        Some(f) => {
            let span = f.span();
            let map = format_ident!("__distlock_map_err", span = Span::mixed_site());
            quote_spanned! {span=> {
                fn #map<E>(f: impl ::core::ops::FnOnce(#krate::LockError) -> E, e: #krate::LockError) -> E {
                    f(e)
                }
                #map(#f, #error)
            }}
        }
        None => quote_spanned!(err_span=> ::core::convert::From::from(#error)),
    };
    let err = quote_spanned!(ret_span=> <_ as #krate::__private::LockResult>::err(#from));

    let name_of = |(lit, template): &(syn::LitStr, crate::template::Template)| {
        template.build(quote!(#krate::__private::KeyBuilder::new()), lit)
    };
    // The request's constructor, its name(s), and the metrics label (the template, never
    // the rendered name; a multi-lock's templates joined by `+`).
    let (constructor, name_expr, family) = match &config.hold {
        Hold::One { key, kind } => {
            let constructor = match kind {
                Kind::Exclusive => quote!(lock),
                Kind::Read => quote!(read_lock),
                Kind::Write => quote!(write_lock),
                Kind::Permit(_) => quote!(semaphore),
            };
            (constructor, name_of(key), key.0.clone())
        }
        Hold::All(keys) => {
            let names = keys.iter().map(name_of);
            let joined: Vec<String> = keys.iter().map(|(lit, _)| lit.value()).collect();
            let family = syn::LitStr::new(&joined.join("+"), keys[0].0.span());
            (quote!(lock_all), quote!([#(#names),*]), family)
        }
    };
    let permits = match &config.hold {
        Hold::One {
            kind: Kind::Permit(permits),
            ..
        } => {
            // Typed here, at the user's expression: a wrong type is reported on it, with no
            // note pointing into lock-core.
            let typed = format_ident!("__distlock_permits", span = Span::mixed_site());
            Some(quote_spanned!(permits.span()=> , { let #typed: u32 = #permits; #typed }))
        }
        _ => None,
    };

    let client_ref = match &config.client {
        Some(expr) => client_ref(expr),
        None => quote! {
            &match #krate::default_client() {
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
    let on_lost = match config.on_lost {
        OnLost::Abort => quote!(#krate::OnLost::Abort),
        OnLost::Continue => quote!(#krate::OnLost::Continue),
    };

    // The body runs as an `async move` block whose output is pinned to the declared return
    // type by a dead `return` (as tracing-attributes does), so a type error in the body is
    // reported on the user's code, not on the attribute, and `?` knows its target type.
    let body = if output.has_impl_trait {
        quote!(async move #block)
    } else {
        // A job's body returns `Result<T, E>` for the function's `Result<JobOutcome<T>, E>`.
        let body_ty = match &config.job {
            Some(_) => quote_spanned!(ret_span=> <#ret_ty as #krate::__private::JobResult>::Body),
            None => quote!(#ret_ty),
        };
        let pin_type = pin_output(&body_ty, ret_span);
        // The statements, not the block: `{ { Ok(id) } }` would trip `unused_braces`.
        let stmts = &block.stmts;
        quote!(async move { #pin_type #(#stmts)* })
    };
    // Inner attributes (`#![allow(…)]`) stay at the top of the body.
    let (inner_attrs, attrs): (Vec<_>, Vec<_>) = attrs
        .into_iter()
        .partition(|attr| matches!(attr.style, syn::AttrStyle::Inner(_)));

    let request_expr = match &config.job {
        Some(job) => {
            let least = job.hold_at_least.map(|(ms, span)| {
                quote_spanned!(span=> .hold_at_least(::core::time::Duration::from_millis(#ms)))
            });
            let most = job.hold_at_most.map(|(ms, span)| {
                quote_spanned!(span=> .hold_at_most(::core::time::Duration::from_millis(#ms)))
            });
            quote!(#krate::LockClient::job(#client_ref, #name) #least #most)
        }
        None => quote!(#krate::LockClient::#constructor(#client_ref, #name #permits) #lease),
    };
    // A job's outcome becomes the function's `Result<JobOutcome<T>, E>`.
    let ok_value = match &config.job {
        Some(_) => {
            quote_spanned!(ret_span=> <#ret_ty as #krate::__private::JobResult>::from_outcome(#ok))
        }
        None => quote!(#ok),
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            #(#inner_attrs)*
            // The name borrows the parameters before the body takes them.
            let #name = #name_expr;
            // `&*&client` (see `client_ref`) is not for the user to simplify.
            #[allow(clippy::deref_addrof, clippy::borrow_deref_ref)]
            let #request = #request_expr
                #wait
                // Metrics are labelled by the template, never by the rendered name.
                .metrics_label(#family)
                .on_lost(#on_lost);
            // Boxed: the caller's future stays small however deep locked calls nest.
            match ::std::boxed::Box::pin(#request.run(#body)).await {
                ::core::result::Result::Ok(#ok) => #ok_value,
                // `E` may be `LockError` itself.
                #[allow(clippy::useless_conversion)]
                ::core::result::Result::Err(#error) => #err,
            }
        }
    }
}
