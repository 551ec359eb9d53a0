//! Phase 2: options as written become a plain, typed [`Config`], or errors.
//!
//! The policy is checked in `policy.rs`; here, everything else, and how the
//! options bear on each other (a literal cost against the policy, which
//! return type a denial needs).

use crate::attr::Options;
use crate::errors::Errors;
use crate::item::{self, Argument, Arguments, Function};
use crate::key::{self, Access, Part};
use crate::policy::{self, max_cost, whole, SitePolicy};
use proc_macro2::Span;
use quote::ToTokens;
use redlimit_grammar::{parse_duration, AlgorithmKind, PolicySpec};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitBool, LitStr, Path};

/// One attribute, validated.
pub(crate) struct Config {
    /// The attribute, for errors about it as a whole.
    pub span: Span,
    pub krate: Path,
    pub policy: SitePolicy,
    pub key: Option<Vec<Part>>,
    pub name: Option<LitStr>,
    pub cost: Cost,
    pub on_limit: OnLimit,
    pub fallback: Option<Path>,
    pub on_error: OnError,
    /// A denial can reach the caller (and no fallback takes it), so the
    /// function must return `Result<_, E: From<RateLimited>>`.
    pub returns_denial: bool,
    /// `refund_on = "err"`: the call's permits are given back when the body
    /// returns `Err(..)`.
    pub refund_on_err: bool,
    /// `settle = path`: the call's cost is an estimate, settled at what
    /// `path(&result)` says the call cost once the body returned.
    pub settle: Option<Path>,
    /// `dry_run = true`: decided and recorded, never denied.
    pub dry_run: bool,
    /// `prefetch = k`: up to k permits taken per store call for a hot key.
    pub prefetch: Option<u64>,
    /// `headroom` and `priority`.
    pub classes: crate::priority::Classes,
}

pub(crate) enum Cost {
    Literal(u64),
    Argument(Access, Span),
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum OnLimit {
    Error,
    /// The longest total wait, in microseconds.
    Wait(Option<u64>),
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum OnError {
    Allow,
    Deny,
    Local,
}

/// The largest arity `redlimit::__private::Fallback` is implemented for.
const MAX_FALLBACK_ARGS: usize = 12;

pub(crate) fn validate(options: Options, function: &Function, args: &Arguments, errors: &mut Errors) -> Option<Config> {
    let before = errors.count();
    let attr_span = options.span.unwrap_or_else(Span::call_site);
    let fn_name = &function.sig.ident;

    let policy = policy::site_policy(&options, attr_span, args, fn_name, errors);
    let key = options.key.as_ref().and_then(|lit| key::parse_template(lit, args, fn_name, errors));
    if let Some(name) = &options.name {
        if name.value().trim().is_empty() {
            errors.push(syn::Error::new(name.span(), "empty `name`: remove it to use the module path and function name, or write one, like `name = \"profile\"`"));
        }
    }
    let cost =
        options.cost.as_ref().map(|expr| cost(expr, args, fn_name, policy.as_ref().and_then(SitePolicy::spec), errors));

    let (on_limit, explicit_error) = on_limit(&options, errors);
    if let Some(fallback) = &options.fallback {
        check_fallback(fallback, explicit_error, args, fn_name, errors);
    }
    let on_error = on_error(&options, errors);
    let refund_on_err = refund_on(&options, policy.as_ref(), errors);
    check_settle(&options, policy.as_ref(), errors);
    let prefetch = prefetch(&options, policy.as_ref(), errors);
    let classes = crate::priority::classes(&options, policy.as_ref(), args, fn_name, errors);

    let cost = cost.flatten().unwrap_or(Cost::Literal(1));
    let returns_denial = options.fallback.is_none()
        && match on_limit {
            OnLimit::Error => true,
            OnLimit::Wait(max) => {
                max.is_some() || on_error == OnError::Deny || unchecked_cost(&cost, policy.as_ref()).is_some()
            }
        };
    if returns_denial && item::return_type(&function.sig).is_none() {
        let unchecked = unchecked_cost(&cost, policy.as_ref());
        unit_return_error(&options, on_limit, on_error, unchecked, &function.sig, errors);
    }

    let krate = options.krate.clone().unwrap_or_else(|| syn::parse_quote!(::redlimit));
    if errors.count() > before {
        return None;
    }
    Some(Config {
        span: attr_span,
        krate,
        policy: policy?,
        key,
        name: options.name,
        cost,
        on_limit,
        fallback: options.fallback,
        on_error,
        returns_denial,
        refund_on_err,
        settle: options.settle,
        dry_run: options.dry_run.as_ref().is_some_and(LitBool::value),
        prefetch,
        classes,
    })
}

/// A cost that may exceed what the policy ever admits, so that waiting
/// cannot always admit the call: one read from an argument, or a literal
/// above 1 (every policy admits 1) under a policy chosen per call.
fn unchecked_cost(cost: &Cost, policy: Option<&SitePolicy>) -> Option<UncheckedCost> {
    match (cost, policy) {
        (Cost::Argument(..), _) => Some(UncheckedCost::Argument),
        (Cost::Literal(n), Some(SitePolicy::PerCall(_))) if *n > 1 => Some(UncheckedCost::PerCall(*n)),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum UncheckedCost {
    Argument,
    PerCall(u64),
}

/// `on_limit` and `max_wait`; also whether `on_limit = "error"` was written.
fn on_limit(options: &Options, errors: &mut Errors) -> (OnLimit, bool) {
    let wait = match &options.on_limit {
        None => None,
        Some(lit) => match lit.value().as_str() {
            "error" => Some(false),
            "wait" => Some(true),
            other => {
                errors.push(syn::Error::new(
                    lit.span(),
                    format!("unknown `on_limit` value \"{other}\": expected \"error\" (return the denial) or \"wait\" (sleep until the call passes); to call another function instead, write `fallback = path::to::fn`"),
                ));
                None
            }
        },
    };
    let max_wait = options.max_wait.as_ref().and_then(|lit| match parse_duration(&lit.value()) {
        Ok(us) => Some(us),
        Err(e) => {
            errors.push(syn::Error::new(
                lit.span(),
                format!("`max_wait` must be a duration, like \"2s\" or \"500ms\": {e}"),
            ));
            None
        }
    });
    if let (Some(lit), false) = (&options.max_wait, wait == Some(true)) {
        errors.push(syn::Error::new(
            lit.span(),
            "`max_wait` bounds `on_limit = \"wait\"`: add `on_limit = \"wait\"`, or remove `max_wait`",
        ));
    }
    match wait {
        Some(true) => (OnLimit::Wait(max_wait), false),
        Some(false) => (OnLimit::Error, true),
        None => (OnLimit::Error, false),
    }
}

/// The fallback is called with the same arguments, so each must be a name.
fn check_fallback(fallback: &Path, explicit_error: bool, args: &Arguments, fn_name: &syn::Ident, errors: &mut Errors) {
    if explicit_error {
        errors.push(syn::Error::new(
            fallback.span(),
            "`fallback` conflicts with `on_limit = \"error\"`: a denied call either returns the error or calls the fallback; remove one",
        ));
    }
    if args.list.len() > MAX_FALLBACK_ARGS {
        errors.push(syn::Error::new(
            fallback.span(),
            format!("`fallback` supports functions of at most {MAX_FALLBACK_ARGS} arguments (`self` included); `{fn_name}` takes {}: group some into a struct", args.list.len()),
        ));
    }
    for arg in &args.list {
        if let Argument::Pattern(span) = arg {
            let mut error = syn::Error::new(
                *span,
                "`fallback` is called with the same arguments, so each must be a plain name: bind this one to a name (e.g. `pair: (u32, u32)`) and destructure it in the body",
            );
            error.combine(syn::Error::new(fallback.span(), "the fallback is named here"));
            errors.push(error);
        }
    }
}

fn on_error(options: &Options, errors: &mut Errors) -> OnError {
    let Some(lit) = &options.on_error else { return OnError::Allow };
    match lit.value().as_str() {
        "allow" => OnError::Allow,
        "deny" => OnError::Deny,
        "local" => OnError::Local,
        other => {
            errors.push(syn::Error::new(
                lit.span(),
                format!("unknown `on_error` value \"{other}\": expected \"allow\" (let calls through while the store is down), \"deny\" (refuse them) or \"local\" (limit in memory until it is back)"),
            ));
            OnError::Allow
        }
    }
}

/// `refund_on = "err"`, the one value, beside a policy whose algorithm can
/// give permits back (known here when it is written in the attribute; a
/// named or per-call one is checked at run time, which logs and refunds nothing).
fn refund_on(options: &Options, policy: Option<&SitePolicy>, errors: &mut Errors) -> bool {
    let Some(lit) = &options.refund_on else { return false };
    let value = lit.value();
    if value != "err" {
        let hint = match value.to_ascii_lowercase().as_str() {
            "error" | "err(..)" | "failure" | "fail" | "failed" => " (did you mean \"err\"?)",
            _ => "",
        };
        errors.push(syn::Error::new(
            lit.span(),
            format!("unknown `refund_on` value \"{value}\"{hint}: expected \"err\" (give the call's permits back when the function returns `Err(..)`)"),
        ));
        return false;
    }
    if let Some(spec) = policy.and_then(SitePolicy::spec).filter(|spec| spec.kind == AlgorithmKind::Concurrency) {
        errors.push(syn::Error::new(
            lit.span(),
            format!("`refund_on` does not apply to `{}`: its permit is held while the function runs and given back when it returns, whatever it returns; remove `refund_on`", spec.kind),
        ));
        return false;
    }
    if let Some(spec) = policy.and_then(SitePolicy::spec).filter(|spec| !policy::refunds(spec.kind)) {
        errors.push(syn::Error::new(
            lit.span(),
            format!("`refund_on` needs an algorithm that can give permits back, and `{}` cannot: it records when each permit was taken, and a refund cannot say which; use fixed_window, token_bucket, leaky_bucket or gcra, or remove `refund_on`", spec.kind),
        ));
        return false;
    }
    true
}

/// `settle = path` beside a policy whose algorithm can settle (known here
/// when written in the attribute; a named or per-call one is checked at run
/// time, which logs and charges nothing), and not beside `refund_on`.
fn check_settle(options: &Options, policy: Option<&SitePolicy>, errors: &mut Errors) {
    let Some(path) = &options.settle else { return };
    if let Some(lit) = &options.refund_on {
        errors.push(syn::Error::new(
            lit.span(),
            "`refund_on` and `settle` both give back what the call took: `settle`'s function sees an `Err` too and can return 0 for it; remove `refund_on`",
        ));
    }
    if let Some(spec) = policy.and_then(SitePolicy::spec).filter(|spec| !policy::refunds(spec.kind)) {
        let why = match spec.kind {
            AlgorithmKind::Concurrency => "its permits are held while the function runs, not spent",
            _ => "it records when each permit was taken, and a settlement cannot give back part of one",
        };
        errors.push(syn::Error::new(
            path.span(),
            format!("`settle` needs an algorithm that can settle a reservation, and `{}` cannot: {why}; use fixed_window, token_bucket, leaky_bucket or gcra, or remove `settle`", spec.kind),
        ));
    }
}

/// `prefetch = k`: k of 2 or more, beside a policy whose permits can be
/// spent later and given back (known here when written in the attribute;
/// a named or per-call one of another algorithm decides without prefetch).
fn prefetch(options: &Options, policy: Option<&SitePolicy>, errors: &mut Errors) -> Option<u64> {
    let lit = options.prefetch.as_ref()?;
    let k = match whole(lit) {
        Ok(k) if k >= 2 => k,
        Ok(k) => {
            errors.push(syn::Error::new(
                lit.span(),
                format!("`prefetch = {k}` takes no more than one call's permits per store call, as without it: write `prefetch = 2` or more (how many permits a hot key may take in one call), or remove `prefetch`"),
            ));
            return None;
        }
        Err(e) => {
            errors.push(syn::Error::new(lit.span(), format!("`prefetch`: {e}")));
            return None;
        }
    };
    let spec = policy.and_then(SitePolicy::spec)?;
    let why = match spec.kind {
        AlgorithmKind::Concurrency => "its permits are held while the function runs, not spent, so none can be taken ahead",
        AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog => "a permit counts from when the store recorded it, not from when it is spent, so permits taken ahead would let more through than the window allows, and unspent ones cannot be given back",
        _ => return Some(k),
    };
    errors.push(syn::Error::new(
        lit.span(),
        format!("`prefetch` does not apply to `{}`: {why}; use fixed_window, token_bucket, leaky_bucket or gcra, or remove `prefetch`", spec.kind),
    ));
    None
}

/// A denial can reach the caller but the function returns `()`: say which
/// option makes that so, and how to fix it.
fn unit_return_error(
    options: &Options,
    on_limit: OnLimit,
    on_error: OnError,
    unchecked: Option<UncheckedCost>,
    sig: &syn::Signature,
    errors: &mut Errors,
) {
    let why = match (on_limit, unchecked) {
        (OnLimit::Error, _) if options.on_limit.is_none() => "`on_limit = \"error\"` (the default) returns a denial as `Err(..)`".to_string(),
        (OnLimit::Error, _) => "`on_limit = \"error\"` returns a denial as `Err(..)`".to_string(),
        (OnLimit::Wait(Some(_)), _) => "`max_wait` returns a denial as `Err(..)` when the wait would be longer".to_string(),
        (OnLimit::Wait(None), _) if on_error == OnError::Deny => "`on_error = \"deny\"` returns a denial as `Err(..)` while the store is unavailable".to_string(),
        (OnLimit::Wait(None), Some(UncheckedCost::PerCall(n))) => format!("`cost = {n}` may exceed what the policy given per call ever admits, and that denial is returned as `Err(..)`"),
        (OnLimit::Wait(None), _) => "a `cost` read from an argument may exceed what the policy ever admits, and that denial is returned as `Err(..)`".to_string(),
    };
    let span = match &sig.output {
        syn::ReturnType::Type(_, ty) => ty.span(),
        syn::ReturnType::Default => sig.ident.span(),
    };
    errors.push(syn::Error::new(
        span,
        format!("{why}, but `{}` returns `()`: return `Result<(), E>` where `E: From<redlimit::RateLimited>`, or call a `fallback = path::to::fn` on denial", sig.ident),
    ));
}

fn cost(
    expr: &Expr,
    args: &Arguments,
    fn_name: &syn::Ident,
    policy: Option<&PolicySpec>,
    errors: &mut Errors,
) -> Option<Cost> {
    match expr {
        Expr::Lit(ExprLit { lit: Lit::Int(lit), .. }) => {
            let cost = match whole(lit) {
                Ok(cost) => cost,
                Err(e) => {
                    errors.push(syn::Error::new(lit.span(), format!("`cost`: {e}")));
                    return None;
                }
            };
            if let Some(spec) = policy {
                // A concurrency call of cost 0 holds no permit: every call would run, bounded by nothing.
                if cost == 0 && spec.kind == AlgorithmKind::Concurrency {
                    errors.push(syn::Error::new(
                        lit.span(),
                        "`cost = 0` holds no permit of a concurrency limiter, so every call would run at once: \
                         remove `cost` (a call holds 1) or hold at least 1",
                    ));
                    return None;
                }
                let max = max_cost(spec);
                if cost > max {
                    errors.push(syn::Error::new(
                        lit.span(),
                        format!("`cost = {cost}` can never pass: `{}` admits at most {max} per call; lower the cost or raise the limit", spec.kind),
                    ));
                    return None;
                }
            }
            Some(Cost::Literal(cost))
        }
        Expr::Path(_) | Expr::Field(_) => {
            let text: String = expr.to_token_stream().to_string().chars().filter(|c| !c.is_whitespace()).collect();
            match Access::parse(&text, &text, expr.span(), args, fn_name, "cost") {
                Ok(access) => Some(Cost::Argument(access, expr.span())),
                Err(message) => {
                    errors.push(syn::Error::new(expr.span(), message));
                    None
                }
            }
        }
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "`cost` takes an integer literal or an argument: write `cost = 5` or `cost = weight` (an unsigned integer argument)",
            ));
            None
        }
    }
}
