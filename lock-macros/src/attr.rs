//! The attribute's options: parsed keeping every keyword token (for error spans), then
//! validated into a final [`Config`].

use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream, Parser as _};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, LitStr, Token};

use crate::template::{Params, Template};

mod kw {
    syn::custom_keyword!(key);
    syn::custom_keyword!(keys);
    syn::custom_keyword!(mode);
    syn::custom_keyword!(permits);
    syn::custom_keyword!(lease);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(client);
    syn::custom_keyword!(on_lost);
    syn::custom_keyword!(map_err);
    syn::custom_keyword!(on_busy);
    syn::custom_keyword!(hold_at_least);
    syn::custom_keyword!(hold_at_most);
}

/// Declares every option once, as `name: keyword => field: value type`: the [`Args`] struct,
/// the parser of one option and the list of valid names in messages all come from here.
macro_rules! options {
    ($($name:literal: $kw:path => $field:ident: $value:ty,)*) => {
        /// The options as written, before validation.
        #[derive(Default)]
        pub(crate) struct Args {
            $($field: Option<$value>,)*
        }

        /// Every option, for "unknown option" messages.
        const OPTIONS: &[&str] = &[$($name),*];

        impl Args {
            /// Parses one `name = value`; a repeated name is an error on its keyword.
            fn parse_option(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
                let lookahead = input.lookahead1();
                $(if lookahead.peek($kw) {
                    let keyword: $kw = input.parse()?;
                    input.parse::<Token![=]>()?;
                    return set(&mut self.$field, $name, keyword.span, input.parse()?);
                })*
                if input.peek(syn::Ident) {
                    let ident: syn::Ident = input.parse()?;
                    let valid = OPTIONS.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>();
                    return Err(syn::Error::new(
                        ident.span(),
                        format!("unknown option `{ident}`: expected one of {}", valid.join(", ")),
                    ));
                }
                Err(lookahead.error())
            }
        }
    };
}

options! {
    "key": kw::key => key: LitStr,
    "keys": kw::keys => keys: KeyList,
    "mode": kw::mode => mode: LitStr,
    "permits": kw::permits => permits: Expr,
    "lease": kw::lease => lease: LitStr,
    "wait": kw::wait => wait: LitStr,
    "client": kw::client => client: Expr,
    "on_lost": kw::on_lost => on_lost: LitStr,
    "map_err": kw::map_err => map_err: Expr,
    "on_busy": kw::on_busy => on_busy: LitStr,
    "hold_at_least": kw::hold_at_least => hold_at_least: LitStr,
    "hold_at_most": kw::hold_at_most => hold_at_most: LitStr,
    "crate": syn::token::Crate => krate: LitStr,
}

/// `keys = ["acct_<from>", "acct_<to>"]` as written.
pub(crate) struct KeyList {
    bracket: syn::token::Bracket,
    items: Punctuated<LitStr, Token![,]>,
}

impl Parse for KeyList {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        let bracket = syn::bracketed!(content in input);
        Ok(Self {
            bracket,
            items: content.parse_terminated(|i| i.parse::<LitStr>(), Token![,])?,
        })
    }
}

/// What the function holds while its body runs.
pub(crate) enum Hold {
    /// One name: the lock, a side of a read-write lock, or a semaphore's permit.
    One { key: (LitStr, Template), kind: Kind },
    /// Several names at once (`LockClient::lock_all`), in the order written.
    All(Vec<(LitStr, Template)>),
}

/// The kind of hold of one name.
pub(crate) enum Kind {
    Exclusive,
    Read,
    Write,
    /// A permit of a semaphore of this many permits (an expression of type `u32`).
    Permit(Expr),
}

/// What `run` does on a lost lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnLost {
    Abort,
    Continue,
}

/// The validated configuration that [`expand`](crate::expand) works from.
pub(crate) struct Config {
    /// The names held and how, with each key template's literal (errors about
    /// placeholders point at it).
    pub(crate) hold: Hold,
    /// Explicit lease in milliseconds (no watchdog).
    pub(crate) lease: Option<(u64, Span)>,
    /// Bounded wait in milliseconds; `0` tries once.
    pub(crate) wait: Option<(u64, Span)>,
    pub(crate) client: Option<Expr>,
    pub(crate) on_lost: OnLost,
    /// A function or closure from `LockError` to the function's error type; without it,
    /// `From::from`.
    pub(crate) map_err: Option<Expr>,
    /// The path of lock-core, `::lock_core` unless `crate = "…"` says otherwise.
    pub(crate) krate: syn::Path,
    /// `on_busy = "skip"`: a scheduled job (`LockClient::job`) whose function returns
    /// `Result<JobOutcome<T>, E>`.
    pub(crate) job: Option<Job>,
}

/// A scheduled job's holds, in milliseconds, each with its literal's span.
pub(crate) struct Job {
    pub(crate) hold_at_least: Option<(u64, Span)>,
    pub(crate) hold_at_most: Option<(u64, Span)>,
}

impl Config {
    /// Parses and validates the attribute's arguments; `params` are the names the function
    /// binds, for the key's placeholders.
    pub(crate) fn parse(attr: TokenStream, params: &Params) -> syn::Result<Self> {
        Args::parse.parse2(attr)?.validate(params)
    }
}

/// Fills `slot`; a second `name = …` is an error on its keyword.
fn set<T>(slot: &mut Option<T>, name: &str, name_span: Span, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            name_span,
            format!("duplicate option `{name}`: give each option once"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            args.parse_option(input)?;
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}

impl Args {
    /// Checks every option, turning the written values into the final [`Config`].
    fn validate(self, params: &Params) -> syn::Result<Config> {
        let hold = self.hold(params)?;
        let job = self.job(&hold)?;
        let lease = self
            .lease
            .map(|opt| {
                let ms = parse_duration(&opt)?;
                if ms == 0 {
                    return Err(syn::Error::new(
                        opt.span(),
                        "`lease` must be longer than zero, e.g. `lease = \"10s\"` \
                         (leave it out to have the watchdog renew the lock)",
                    ));
                }
                Ok((ms, opt.span()))
            })
            .transpose()?;
        let wait = self
            .wait
            .map(|opt| Ok::<_, syn::Error>((parse_duration(&opt)?, opt.span())))
            .transpose()?;
        let on_lost = match self.on_lost {
            None => OnLost::Abort,
            Some(opt) => match opt.value().as_str() {
                "abort" => OnLost::Abort,
                "continue" => OnLost::Continue,
                other => {
                    return Err(syn::Error::new(
                        opt.span(),
                        format!(
                            "unknown `on_lost` value {other:?}: expected \"abort\" or \"continue\""
                        ),
                    ))
                }
            },
        };
        if let Some(Expr::Lit(lit)) = &self.map_err {
            return Err(syn::Error::new_spanned(
                lit,
                "`map_err` takes a function or a closure from `LockError` to the function's \
                 error type, e.g. `map_err = ApiError::from_lock` or `map_err = |e| e.to_string()`, \
                 not a literal",
            ));
        }
        let krate = match self.krate {
            None => syn::parse_quote!(::lock_core),
            Some(opt) => opt.parse::<syn::Path>().map_err(|_| {
                syn::Error::new(
                    opt.span(),
                    format!(
                        "`crate` must be a path such as \"::lock_core\" or \"my_crate::locks\", not {:?}",
                        opt.value()
                    ),
                )
            })?,
        };
        Ok(Config {
            hold,
            lease,
            wait,
            client: self.client,
            on_lost,
            map_err: self.map_err,
            krate,
            job,
        })
    }
}

impl Args {
    /// `key` (with `mode` or `permits`) or `keys`: exactly one, each checked on its tokens.
    fn hold(&self, params: &Params) -> syn::Result<Hold> {
        match (&self.key, &self.keys) {
            (Some(_), Some(list)) => Err(syn::Error::new(
                list.bracket.span.join(),
                "give either `key` (one lock) or `keys` (several names at once), not both",
            )),
            (None, None) => Err(syn::Error::new(
                Span::call_site(),
                "missing option `key`: write the lock's name, e.g. \
                 `#[distributed_lock(key = \"item_<id>\")]` (or `keys = [\"a_<x>\", \"b_<y>\"]` \
                 to hold several names at once)",
            )),
            (Some(key), None) => Ok(Hold::One {
                key: (key.clone(), Template::parse(key, params)?),
                kind: self.kind()?,
            }),
            (None, Some(list)) => self.all(list, params).map(Hold::All),
        }
    }

    /// The templates of `keys`: at least one, none twice; no `mode` or `permits` beside it.
    fn all(&self, list: &KeyList, params: &Params) -> syn::Result<Vec<(LitStr, Template)>> {
        if let Some(mode) = &self.mode {
            return Err(syn::Error::new(
                mode.span(),
                "`mode` does not apply to `keys`: a multi-lock takes every name exclusively",
            ));
        }
        if let Some(permits) = &self.permits {
            return Err(syn::Error::new_spanned(
                permits,
                "`permits` does not apply to `keys`: a semaphore has one name (`key`)",
            ));
        }
        if list.items.is_empty() {
            return Err(syn::Error::new(
                list.bracket.span.join(),
                "`keys` is empty: list the names to hold, e.g. `keys = [\"acct_<from>\", \"acct_<to>\"]`",
            ));
        }
        let mut templates: Vec<(LitStr, Template)> = Vec::with_capacity(list.items.len());
        for lit in &list.items {
            if templates
                .iter()
                .any(|(seen, _)| seen.value() == lit.value())
            {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("{:?} is listed twice in `keys`", lit.value()),
                ));
            }
            templates.push((lit.clone(), Template::parse(lit, params)?));
        }
        Ok(templates)
    }

    /// `mode` and `permits` of a one-name hold.
    fn kind(&self) -> syn::Result<Kind> {
        match (&self.mode, &self.permits) {
            (Some(_), Some(permits)) => Err(syn::Error::new_spanned(
                permits,
                "`permits` makes a semaphore, which has no `mode`: give one or the other",
            )),
            (None, Some(permits)) => permits_of(permits).map(Kind::Permit),
            (None, None) => Ok(Kind::Exclusive),
            (Some(mode), None) => match mode.value().as_str() {
                "exclusive" => Ok(Kind::Exclusive),
                "read" => Ok(Kind::Read),
                "write" => Ok(Kind::Write),
                other => Err(syn::Error::new(
                    mode.span(),
                    format!(
                        "unknown `mode` {other:?}: expected \"read\" or \"write\" (a read-write \
                         lock's sides), or \"exclusive\" (the default)"
                    ),
                )),
            },
        }
    }
}

impl Args {
    /// `on_busy`, `hold_at_least` and `hold_at_most`: a scheduled job of one exclusive name,
    /// whose minimum hold fits in its maximum.
    fn job(&self, hold: &Hold) -> syn::Result<Option<Job>> {
        let skip = match &self.on_busy {
            None => false,
            Some(opt) => match opt.value().as_str() {
                "skip" => true,
                "wait" => false,
                other => {
                    return Err(syn::Error::new(
                        opt.span(),
                        format!(
                            "unknown `on_busy` value {other:?}: expected \"skip\" (a scheduled \
                             job: run once across the fleet, return `JobOutcome::Skipped` where \
                             the name is held) or \"wait\" (the default)"
                        ),
                    ))
                }
            },
        };
        let least = self.hold_at_least.as_ref().map(nonzero).transpose()?;
        let most = self.hold_at_most.as_ref().map(nonzero).transpose()?;
        if !skip {
            let stray = (self.hold_at_least.as_ref().map(|l| ("hold_at_least", l)))
                .or(self.hold_at_most.as_ref().map(|l| ("hold_at_most", l)));
            return match stray {
                Some((option, lit)) => Err(syn::Error::new(
                    lit.span(),
                    format!(
                        "`{option}` applies to scheduled jobs: add `on_busy = \"skip\"` (the \
                         function then returns `Result<JobOutcome<T>, E>`)"
                    ),
                )),
                None => Ok(None),
            };
        }
        let on_busy = self.on_busy.as_ref().expect("skip was given");
        let not_one_name = match hold {
            Hold::All(_) => Some("`keys`"),
            Hold::One {
                kind: Kind::Exclusive,
                ..
            } => None,
            Hold::One {
                kind: Kind::Permit(_),
                ..
            } => Some("`permits`"),
            Hold::One { .. } => Some("`mode`"),
        };
        if let Some(option) = not_one_name {
            return Err(syn::Error::new(
                on_busy.span(),
                format!(
                    "`on_busy = \"skip\"` runs a scheduled job on one exclusive name: it does \
                     not combine with {option}"
                ),
            ));
        }
        if let Some(lease) = &self.lease {
            return Err(syn::Error::new(
                lease.span(),
                "a scheduled job's lease is `hold_at_most`: write `hold_at_most = \"…\"` \
                 instead of `lease`",
            ));
        }
        if let (Some((l, span)), Some((m, _))) = (least, most) {
            if l > m {
                return Err(syn::Error::new(
                    span,
                    "`hold_at_least` is longer than `hold_at_most`: the hold would end \
                     before its minimum; make `hold_at_most` at least as long",
                ));
            }
        }
        Ok(Some(Job {
            hold_at_least: least,
            hold_at_most: most,
        }))
    }
}

/// A duration above zero, with its span.
fn nonzero(lit: &LitStr) -> syn::Result<(u64, Span)> {
    match parse_duration(lit)? {
        0 => Err(syn::Error::new(
            lit.span(),
            "a hold must be longer than zero, e.g. \"5m\" (leave the option out for none)",
        )),
        ms => Ok((ms, lit.span())),
    }
}

/// `permits`: a positive integer literal, or any other expression (a `const`, a field),
/// which the compiler then checks to be a `u32`.
fn permits_of(permits: &Expr) -> syn::Result<Expr> {
    let bad = |message: &str| Err(syn::Error::new_spanned(permits, message.to_owned()));
    match permits {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => match int.base10_parse::<u32>() {
            Ok(0) => {
                bad("`permits` must be at least 1: it is how many may hold the semaphore at once")
            }
            Ok(_) => Ok(permits.clone()),
            Err(_) => bad("`permits` must fit a `u32`"),
        },
        Expr::Lit(_) => {
            bad("`permits` is a number of holders, e.g. `permits = 3`, not this literal")
        }
        Expr::Unary(unary) if matches!(unary.op, syn::UnOp::Neg(_)) => {
            bad("`permits` must be at least 1, not negative")
        }
        _ => Ok(permits.clone()),
    }
}

/// Parses a human duration such as `"10s"`, `"500ms"`, `"2m"` or `"1m30s"` into milliseconds.
fn parse_duration(lit: &LitStr) -> syn::Result<u64> {
    let text = lit.value();
    duration_ms(&text).ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!(
                "bad duration {text:?}: write a number with a unit `ms`, `s`, `m` or `h`, \
                 such as \"500ms\", \"10s\", \"2m\", \"1m30s\" or \"1h\""
            ),
        )
    })
}

fn duration_ms(text: &str) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.checked_add(number.checked_mul(factor)?)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::{duration_ms, Args, OPTIONS};

    /// Every option the messages list parses, once; the list is the parser's.
    #[test]
    fn listed_options_are_the_parsed_ones() {
        for option in OPTIONS {
            let value = if *option == "keys" {
                "[\"a\"]"
            } else {
                "\"1s\""
            };
            let args = syn::parse_str::<Args>(&format!("{option} = {value}"));
            assert!(args.is_ok(), "{option}");
            let twice = syn::parse_str::<Args>(&format!("{option} = {value}, {option} = {value}"));
            let err = twice
                .err()
                .expect("a repeated option is an error")
                .to_string();
            assert!(
                err.contains(&format!("duplicate option `{option}`")),
                "{err}"
            );
        }
        let err = syn::parse_str::<Args>("timeout = \"2s\"")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            err,
            "unknown option `timeout`: expected one of `key`, `keys`, `mode`, `permits`, \
             `lease`, `wait`, `client`, `on_lost`, `map_err`, `on_busy`, `hold_at_least`, \
             `hold_at_most`, `crate`"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ms("10s"), Some(10_000));
        assert_eq!(duration_ms("500ms"), Some(500));
        assert_eq!(duration_ms("2m"), Some(120_000));
        assert_eq!(duration_ms("1m30s"), Some(90_000));
        assert_eq!(duration_ms("1h"), Some(3_600_000));
        assert_eq!(duration_ms("0s"), Some(0));
        for bad in [
            "",
            "10",
            "s",
            "10 s",
            "1.5s",
            "10d",
            "-1s",
            "99999999999999999999s",
        ] {
            assert_eq!(duration_ms(bad), None, "{bad:?}");
        }
    }
}
