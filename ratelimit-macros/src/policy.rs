//! Phase 2, the policy: written in the attribute (checked by
//! `redlimit-grammar`, the same code the runtime's `Policy` constructors
//! use, with `precision` and `burst` defaults applied so the emitted
//! constant is complete and nothing is parsed at run time), named for
//! configuration, or given per call by an expression.

use crate::attr::{Options, PolicyOption};
use crate::errors::Errors;
use crate::item::Arguments;
use proc_macro2::Span;
use redlimit_grammar::{
    parse_duration, parse_rate, parse_strategies, AlgorithmKind, Param, PolicySpec, Refill, Strategy,
};
use syn::{Expr, LitInt, LitStr};

/// Where a site's policy comes from.
pub(crate) enum SitePolicy {
    /// Written in the attribute. Complete: defaults applied, every rule checked.
    Inline(PolicySpec),
    /// `policy = "search"`: a name, looked up in the configured set at run time.
    Named(LitStr),
    /// `policy = plan_policy(&user)`: evaluated per call; its type is checked
    /// by rustc (through `AsPolicy`), so no literal cost is checked against it.
    PerCall(Expr),
}

impl SitePolicy {
    pub(crate) fn spec(&self) -> Option<&PolicySpec> {
        match self {
            SitePolicy::Inline(spec) => Some(spec),
            SitePolicy::Named(_) | SitePolicy::PerCall(_) => None,
        }
    }
}

/// Whether `kind` can give permits back, as the runtime's `algo::refunds`
/// says: not the sliding window or log, whose state records when permits were taken.
pub(crate) fn refunds(kind: AlgorithmKind) -> bool {
    !matches!(kind, AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog | AlgorithmKind::Concurrency)
}

/// The attribute's policy, or `None` when anything about it is wrong (all reported).
pub(crate) fn site_policy(
    options: &Options,
    attr_span: Span,
    args: &Arguments,
    fn_name: &syn::Ident,
    errors: &mut Errors,
) -> Option<SitePolicy> {
    match &options.policy {
        Some(PolicyOption::Name(lit)) => named_policy(lit, options, errors).map(SitePolicy::Named),
        Some(PolicyOption::Expr(expr)) => {
            per_call_policy(expr, options, args, fn_name, errors).map(SitePolicy::PerCall)
        }
        None => policy(options, attr_span, errors).map(SitePolicy::Inline),
    }
}

/// `policy = "name"`: a valid name, and no algorithm or parameter beside it
/// (they come from the configured policy).
fn named_policy(lit: &LitStr, options: &Options, errors: &mut Errors) -> Option<LitStr> {
    let before = errors.count();
    if let Err(e) = redlimit_grammar::check_policy_name(&lit.value()) {
        errors.push(syn::Error::new(lit.span(), format!("`policy`: {}", e.message())));
    }
    let name = lit.value();
    no_parameters(options, errors, |option| {
        format!("`{option}` cannot be combined with `policy`: the policy \"{name}\" is configured at run time with its own `algo` and parameters; remove `{option}` here (set it in the policy's configuration), or remove `policy` to write the limits in the attribute")
    });
    (errors.count() == before).then(|| lit.clone())
}

/// `policy = <expression>`: no algorithm or parameter beside it (each
/// call's `Policy` brings its own). The expression itself is rustc's to
/// check, but for a bare lowercase name that is no argument: most likely a
/// configured policy's name written without quotes.
fn per_call_policy(
    expr: &Expr,
    options: &Options,
    args: &Arguments,
    fn_name: &syn::Ident,
    errors: &mut Errors,
) -> Option<Expr> {
    let before = errors.count();
    if let Expr::Path(path) = expr {
        if let (None, Some(ident)) = (&path.qself, path.path.get_ident()) {
            let name = ident.to_string();
            if name.starts_with(|c: char| c.is_ascii_lowercase()) && name != "self" && args.binding(&name).is_none() {
                errors.push(syn::Error::new(
                    ident.span(),
                    format!("`{name}` is not an argument of `{fn_name}` ({}): to apply the configured policy `{name}`, write its name as a string, `policy = \"{name}\"`; an expression must compute a `Policy` from the arguments", args.describe()),
                ));
            }
        }
    }
    no_parameters(options, errors, |option| {
        format!("`{option}` cannot be combined with `policy = <expression>`: the `Policy` that expression gives each call has its own `algo` and parameters; remove `{option}`, or remove `policy` to write the limits in the attribute")
    });
    (errors.count() == before).then(|| expr.clone())
}

/// An error at each of `algo` and its parameters that is written, saying `why(option)`.
fn no_parameters(options: &Options, errors: &mut Errors, why: impl Fn(&str) -> String) {
    let written: [(&str, Option<Span>); 9] = [
        ("algo", options.algo.as_ref().map(LitStr::span)),
        ("strategies", options.strategies.as_ref().map(LitStr::span)),
        ("precision", options.precision.as_ref().map(LitStr::span)),
        ("capacity", options.capacity.as_ref().map(LitInt::span)),
        ("rate", options.rate.as_ref().map(LitStr::span)),
        ("refill", options.refill.as_ref().map(LitStr::span)),
        ("burst", options.burst.as_ref().map(LitInt::span)),
        ("limit", options.limit.as_ref().map(LitInt::span)),
        ("lease", options.lease.as_ref().map(LitStr::span)),
    ];
    for (option, span) in written {
        if let Some(span) = span {
            errors.push(syn::Error::new(span, why(option)));
        }
    }
}

/// Parses and checks the policy; `None` when anything is wrong (all reported).
fn policy(options: &Options, attr_span: Span, errors: &mut Errors) -> Option<PolicySpec> {
    let kind = match &options.algo {
        None if options.mentioned_algo => None,
        None => {
            let names = AlgorithmKind::ALL.map(|k| format!("`{k}`")).join(", ");
            errors.push(syn::Error::new(attr_span, format!("missing `algo`: add e.g. `algo = \"sliding_window\"`; the algorithms are {names}; or name a policy configured at run time, like `policy = \"search\"`")));
            None
        }
        Some(lit) => match AlgorithmKind::from_name(&lit.value()) {
            Ok(kind) => Some(kind),
            Err(e) => {
                errors.push(syn::Error::new(lit.span(), e.message()));
                None
            }
        },
    };

    // Parse each parameter given; a malformed one is reported and replaced by
    // a placeholder, so the rules below still run on the others (and see it
    // as given) without repeating its error.
    let mut spec = PolicySpec::new(kind.unwrap_or(AlgorithmKind::FixedWindow));
    let mut malformed: Vec<Param> = Vec::new();
    let mut fail = |param: Param, span: Span, message: String, errors: &mut Errors| {
        errors.push(syn::Error::new(span, format!("`{}`: {message}", param.name())));
        malformed.push(param);
    };
    let placeholder_rate = redlimit_grammar::Rate { count: 1, period_us: 1_000_000 };
    if let Some(lit) = &options.strategies {
        spec.strategies = Some(parse_strategies(&lit.value()).unwrap_or_else(|e| {
            fail(Param::Strategies, lit.span(), e.to_string(), errors);
            vec![Strategy::new(1, 1_000_000)]
        }));
    }
    if let Some(lit) = &options.precision {
        spec.precision = Some(parse_duration(&lit.value()).unwrap_or_else(|e| {
            fail(Param::Precision, lit.span(), e.to_string(), errors);
            1
        }));
    }
    if let Some(lit) = &options.capacity {
        spec.capacity = Some(whole(lit).unwrap_or_else(|e| {
            fail(Param::Capacity, lit.span(), e, errors);
            1
        }));
    }
    if let Some(lit) = &options.rate {
        spec.rate = Some(parse_rate(&lit.value()).unwrap_or_else(|e| {
            fail(Param::Rate, lit.span(), e.to_string(), errors);
            placeholder_rate
        }));
    }
    if let Some(lit) = &options.refill {
        spec.refill = Some(Refill::from_name(&lit.value()).unwrap_or_else(|e| {
            fail(Param::Refill, lit.span(), e.to_string(), errors);
            Refill::Continuous
        }));
    }
    if let Some(lit) = &options.burst {
        spec.burst = Some(whole(lit).unwrap_or_else(|e| {
            fail(Param::Burst, lit.span(), e, errors);
            0
        }));
    }
    if let Some(lit) = &options.limit {
        spec.limit = Some(whole(lit).unwrap_or_else(|e| {
            fail(Param::Limit, lit.span(), e, errors);
            1
        }));
    }
    if let Some(lit) = &options.lease {
        spec.lease = Some(parse_duration(&lit.value()).unwrap_or_else(|e| {
            fail(Param::Lease, lit.span(), e.to_string(), errors);
            1_000_000
        }));
    }
    let kind = kind?;

    let span_of = |param: Param| -> Span {
        let span = match param {
            Param::Strategies => options.strategies.as_ref().map(LitStr::span),
            Param::Precision => options.precision.as_ref().map(LitStr::span),
            Param::Capacity => options.capacity.as_ref().map(LitInt::span),
            Param::Rate => options.rate.as_ref().map(LitStr::span),
            Param::Burst => options.burst.as_ref().map(LitInt::span),
            Param::Limit => options.limit.as_ref().map(LitInt::span),
            Param::Lease => options.lease.as_ref().map(LitStr::span),
            Param::Refill => options.refill.as_ref().map(LitStr::span),
        };
        span.unwrap_or_else(|| options.algo.as_ref().map_or(attr_span, LitStr::span))
    };
    let mut valid = malformed.is_empty();
    if let Err(problems) = spec.validate() {
        for (param, problem) in problems {
            match param {
                Some(param) if malformed.contains(&param) => continue,
                Some(param) => errors.push(syn::Error::new(span_of(param), problem.message())),
                // A missing parameter: point at the algorithm that needs it.
                None => errors
                    .push(syn::Error::new(options.algo.as_ref().map_or(attr_span, LitStr::span), problem.message())),
            }
            valid = false;
        }
    }
    if !valid {
        return None;
    }
    if kind == AlgorithmKind::SlidingWindow && spec.precision.is_none() {
        spec.precision = Some(PolicySpec::default_precision(spec.strategies.as_deref().unwrap_or_default()));
    }
    if let (AlgorithmKind::Gcra, None, Some(rate)) = (kind, spec.burst, spec.rate) {
        spec.burst = Some(PolicySpec::default_burst(rate));
    }
    Some(spec)
}

pub(crate) fn whole(lit: &LitInt) -> Result<u64, String> {
    if !lit.suffix().is_empty() {
        return Err(format!("write a plain number, without the `{}` suffix", lit.suffix()));
    }
    lit.base10_parse::<u64>().map_err(|_| "must be a whole number, like 10".to_string())
}

/// The most permits one call could ever take, as `Policy::max_cost` computes it.
pub(crate) fn max_cost(spec: &PolicySpec) -> u64 {
    match spec.kind {
        AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket => spec.capacity.unwrap_or(0),
        AlgorithmKind::Gcra => spec.burst.unwrap_or(0) + 1,
        AlgorithmKind::Concurrency => spec.limit.unwrap_or(0),
        _ => spec.strategies.iter().flatten().map(|s| s.limit).min().unwrap_or(0),
    }
}
