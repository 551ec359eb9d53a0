//! Phase 1: the attribute's options as written, each with its span.
//!
//! Parsing only checks shape (`name = value`, each name once, a value of the
//! right kind); what the values mean is checked in `validate.rs`. Every
//! mistake is collected, so one build reports all of them.

use crate::errors::Errors;
use proc_macro2::{Span, TokenStream};
use redlimit_grammar::ATTRIBUTE_OPTIONS;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitBool, LitInt, LitStr, Path, Token};

/// Names people reach for, and the option they mean.
const RENAMES: &[(&str, &str)] = &[
    ("algorithm", "algo"),
    ("strategy", "strategies"),
    ("limits", "strategies"),
    ("window", "strategies"),
    ("size", "capacity"),
    ("bucket_size", "capacity"),
    ("refill_rate", "rate"),
    ("leak_rate", "rate"),
    ("weight", "cost"),
    ("permits", "cost"),
    ("wait", "on_limit"),
    ("on_deny", "on_limit"),
    ("on_exceed", "on_limit"),
    ("max", "max_wait"),
    ("timeout", "max_wait"),
    ("wait_max", "max_wait"),
    ("on_failure", "on_error"),
    ("on_store_error", "on_error"),
    ("keys", "key"),
    ("prefix", "name"),
    ("policy_name", "policy"),
    ("named_policy", "policy"),
    ("krate", "crate"),
    ("refund", "refund_on"),
    ("refund_on_err", "refund_on"),
    ("refund_on_error", "refund_on"),
    ("refund_when", "refund_on"),
    ("deduct_when", "refund_on"),
    ("settle_with", "settle"),
    ("actual_cost", "settle"),
    ("reserve", "settle"),
    ("shadow", "dry_run"),
    ("shadow_mode", "dry_run"),
    ("batch", "prefetch"),
    ("local_quota", "prefetch"),
    ("prefetch_size", "prefetch"),
    ("class", "priority"),
    ("priority_class", "priority"),
    ("reserved", "headroom"),
];

/// `policy = ...` as written: a string names a configured policy; any other
/// expression gives each call's policy.
pub(crate) enum PolicyOption {
    Name(LitStr),
    Expr(Expr),
}

/// One `name = value` as written.
struct RawOption {
    name: Ident,
    value: Expr,
}

impl Parse for RawOption {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // `parse_any` accepts the keyword `crate` as an option name.
        let name = Ident::parse_any(input)?;
        if !input.peek(Token![=]) {
            let hint = match name.to_string().as_str() {
                "key" | "name" => "a string, like `key = \"user:<user_id>\"`",
                "fallback" => "a path, like `fallback = cached_profile`",
                _ => "a value, like `algo = \"sliding_window\"`",
            };
            return Err(syn::Error::new(name.span(), format!("`{name}` needs `= ...`: write {hint}")));
        }
        input.parse::<Token![=]>()?;
        let value = input.parse()?;
        Ok(RawOption { name, value })
    }
}

/// The options of one `#[rate_limit(...)]`, each at most once.
#[derive(Default)]
pub(crate) struct Options {
    /// The attribute as a whole, for errors about a missing option.
    pub span: Option<Span>,
    /// `algo` or `policy` was written (or misspelled, or given a wrong kind
    /// of value): its own error is enough, "missing `algo`" would repeat it.
    pub mentioned_algo: bool,
    pub policy: Option<PolicyOption>,
    pub algo: Option<LitStr>,
    pub strategies: Option<LitStr>,
    pub precision: Option<LitStr>,
    pub capacity: Option<LitInt>,
    pub rate: Option<LitStr>,
    pub refill: Option<LitStr>,
    pub burst: Option<LitInt>,
    pub limit: Option<LitInt>,
    pub lease: Option<LitStr>,
    pub headroom: Option<LitStr>,
    pub key: Option<LitStr>,
    pub name: Option<LitStr>,
    pub cost: Option<Expr>,
    pub priority: Option<Expr>,
    pub on_limit: Option<LitStr>,
    pub max_wait: Option<LitStr>,
    pub fallback: Option<Path>,
    pub on_error: Option<LitStr>,
    pub refund_on: Option<LitStr>,
    pub settle: Option<Path>,
    pub dry_run: Option<LitBool>,
    pub prefetch: Option<LitInt>,
    pub krate: Option<Path>,
}

impl Options {
    /// Parses `tokens` (what is inside the parentheses), adding every
    /// mistake to `errors`; `None` when they are not even `name = value` pairs.
    pub(crate) fn parse(tokens: TokenStream, span: Span, errors: &mut Errors) -> Option<Options> {
        let mut options = Options { span: Some(span), ..Options::default() };
        let raw = match Punctuated::<RawOption, Token![,]>::parse_terminated.parse2(tokens) {
            Ok(raw) => raw,
            Err(error) => {
                errors.push(error);
                return None;
            }
        };
        let mut seen: Vec<String> = Vec::new();
        for RawOption { name, value } in raw {
            let text = name.to_string();
            options.mentioned_algo |=
                ["algo", "policy"].iter().any(|o| text == *o || RENAMES.contains(&(text.as_str(), *o)));
            if !ATTRIBUTE_OPTIONS.contains(&text.as_str()) {
                errors.push(syn::Error::new(name.span(), unknown_option(&text)));
                continue;
            }
            if seen.contains(&text) {
                errors.push(syn::Error::new(
                    name.span(),
                    format!("duplicate option `{text}`: it is already given earlier in this attribute; keep one"),
                ));
                continue;
            }
            seen.push(text.clone());
            let result = match text.as_str() {
                "policy" => {
                    options.policy = Some(match value {
                        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => PolicyOption::Name(lit),
                        other => PolicyOption::Expr(other),
                    });
                    Ok(())
                }
                "algo" => string(&name, value, "algo = \"sliding_window\"").map(|v| options.algo = Some(v)),
                "strategies" => string(&name, value, "strategies = \"10/1s,100/1m\"").map(|v| options.strategies = Some(v)),
                "precision" => string(&name, value, "precision = \"100ms\"").map(|v| options.precision = Some(v)),
                "capacity" => integer(&name, value, "capacity = 10").map(|v| options.capacity = Some(v)),
                "rate" => string(&name, value, "rate = \"1/3s\"").map(|v| options.rate = Some(v)),
                "refill" => string(&name, value, "refill = \"interval\"").map(|v| options.refill = Some(v)),
                "burst" => integer(&name, value, "burst = 5").map(|v| options.burst = Some(v)),
                "limit" => integer(&name, value, "limit = 10").map(|v| options.limit = Some(v)),
                "lease" => string(&name, value, "lease = \"30s\"").map(|v| options.lease = Some(v)),
                "headroom" => {
                    string(&name, value, "headroom = \"low 50%, normal 20%\"").map(|v| options.headroom = Some(v))
                }
                "priority" => {
                    options.priority = Some(value);
                    Ok(())
                }
                "key" => string(&name, value, "key = \"user:<user_id>\"").map(|v| options.key = Some(v)),
                "name" => string(&name, value, "name = \"profile\"").map(|v| options.name = Some(v)),
                "cost" => {
                    options.cost = Some(value);
                    Ok(())
                }
                "on_limit" => string(&name, value, "on_limit = \"wait\"").map(|v| options.on_limit = Some(v)),
                "max_wait" => string(&name, value, "max_wait = \"2s\"").map(|v| options.max_wait = Some(v)),
                "fallback" => path(&name, value, "fallback = cached_profile").map(|v| options.fallback = Some(v)),
                "on_error" => string(&name, value, "on_error = \"deny\"").map(|v| options.on_error = Some(v)),
                "refund_on" => string(&name, value, "refund_on = \"err\"").map(|v| options.refund_on = Some(v)),
                "settle" => settle_path(&name, value).map(|v| options.settle = Some(v)),
                "dry_run" => boolean(&name, value, "dry_run = true").map(|v| options.dry_run = Some(v)),
                "prefetch" => integer(&name, value, "prefetch = 100").map(|v| options.prefetch = Some(v)),
                "crate" => string(&name, value, "crate = \"my_facade::redlimit\"")
                    .and_then(|lit| lit.parse::<Path>().map_err(|_| {
                        syn::Error::new(lit.span(), "`crate` must name a path to the `redlimit` crate, like `crate = \"::redlimit\"` or `crate = \"my_facade::redlimit\"`")
                    }))
                    .map(|v| options.krate = Some(v)),
                _ => unreachable!("every name in ATTRIBUTE_OPTIONS is matched"),
            };
            if let Err(error) = result {
                errors.push(error);
            }
        }
        Some(options)
    }
}

fn unknown_option(name: &str) -> String {
    let valid = ATTRIBUTE_OPTIONS.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ");
    match RENAMES.iter().find(|(from, _)| *from == name) {
        Some((_, to)) => format!("unknown option `{name}`: did you mean `{to}`? Valid options: {valid}"),
        None => format!("unknown option `{name}`: expected one of {valid}"),
    }
}

fn string(name: &Ident, value: Expr, example: &str) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => Ok(lit),
        other => Err(syn::Error::new(other.span(), format!("`{name}` takes a string: write `{example}`"))),
    }
}

fn boolean(name: &Ident, value: Expr, example: &str) -> syn::Result<LitBool> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Bool(lit), .. }) => Ok(lit),
        other => Err(syn::Error::new(other.span(), format!("`{name}` takes `true` or `false`: write `{example}`"))),
    }
}

fn integer(name: &Ident, value: Expr, example: &str) -> syn::Result<LitInt> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Int(lit), .. }) => Ok(lit),
        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => {
            Err(syn::Error::new(lit.span(), format!("`{name}` takes an integer, not a string: write `{example}`")))
        }
        other => Err(syn::Error::new(other.span(), format!("`{name}` takes an integer literal: write `{example}`"))),
    }
}

/// `settle = path::to::fn`, a function of the result.
fn settle_path(name: &Ident, value: Expr) -> syn::Result<Path> {
    match value {
        Expr::Path(p) if p.qself.is_none() => Ok(p.path),
        other => Err(syn::Error::new(
            other.span(),
            format!(
                "`{name}` takes a path to a function of the result, `fn(&Output) -> u64`: write `settle = tokens_used`"
            ),
        )),
    }
}

/// `fallback = path::to::fn`; a string holding a path is accepted too.
fn path(name: &Ident, value: Expr, example: &str) -> syn::Result<Path> {
    match value {
        Expr::Path(p) if p.qself.is_none() => Ok(p.path),
        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => lit.parse::<Path>().map_err(|_| {
            syn::Error::new(lit.span(), format!("`{name}` takes a path to an async fn: write `{example}`"))
        }),
        other => Err(syn::Error::new(other.span(), format!("`{name}` takes a path to an async fn: write `{example}`"))),
    }
}
