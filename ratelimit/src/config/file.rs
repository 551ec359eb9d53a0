//! Reading a policies document: TOML with one table per named policy, in the
//! attribute's own option names, or one line of a policy's text each,
//! checked by the shared grammar.

use crate::policy::Policy;
use redlimit_grammar::{
    check_policy_name, parse_duration, parse_rate, parse_strategies, quote, AlgorithmKind, Param, PolicySpec, Refill,
    ATTRIBUTE_OPTIONS, MAX_LIMIT, POLICY_OPTIONS,
};
use std::collections::BTreeMap;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Every problem of one document, each as `<origin>:<line>: ...`, in line order.
struct Problems<'a> {
    origin: &'a str,
    text: &'a str,
    found: Vec<(usize, String)>,
}

impl Problems<'_> {
    fn line(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())].matches('\n').count() + 1
    }

    fn push(&mut self, span: Range<usize>, message: String) {
        let line = self.line(span.start);
        self.found.push((line, format!("{}:{line}: {message}", self.origin)));
    }
}

/// Parses `text` (named `origin` in messages): every policy, or every problem.
pub(crate) fn parse(origin: &str, text: &str) -> Result<BTreeMap<String, Policy>, Vec<String>> {
    let document = match DeTable::parse(text) {
        Ok(document) => document,
        Err(error) => {
            let at = error.span().map_or(0, |span| span.start).min(text.len());
            let line = text[..at].matches('\n').count() + 1;
            let column = text[..at].rsplit('\n').next().map_or(0, |s| s.chars().count()) + 1;
            return Err(vec![format!("{origin}:{line}:{column}: invalid TOML: {}", error.message().trim_end())]);
        }
    };
    let mut problems = Problems { origin, text, found: Vec::new() };
    let mut policies = BTreeMap::new();
    for (key, value) in document.get_ref() {
        if key.get_ref() != "policies" {
            problems.push(
                key.span(),
                format!(
                    "unknown top-level key \"{}\": policies are tables named `[policies.<name>]`",
                    quote(key.get_ref().as_ref())
                ),
            );
            continue;
        }
        let DeValue::Table(tables) = value.get_ref() else {
            problems.push(value.span(), "`policies` must be a table of policies, like `[policies.search]`".into());
            continue;
        };
        for (name, table) in tables {
            if let Some(policy) = policy(name, table, &mut problems) {
                policies.insert(name.get_ref().to_string(), policy);
            }
        }
    }
    if problems.found.is_empty() {
        return Ok(policies);
    }
    problems.found.sort_by_key(|(line, _)| *line);
    Err(problems.found.into_iter().map(|(_, message)| message).collect())
}

/// One `[policies.<name>]` table; `None` when anything is wrong (all reported).
fn policy(
    name: &Spanned<std::borrow::Cow<'_, str>>,
    table: &Spanned<DeValue<'_>>,
    problems: &mut Problems<'_>,
) -> Option<Policy> {
    let before = problems.found.len();
    let label = format!("policy \"{}\"", quote(name.get_ref().as_ref()));
    if let Err(e) = check_policy_name(name.get_ref()) {
        problems.push(name.span(), format!("{label}: {e}"));
    }
    let options = match table.get_ref() {
        DeValue::Table(options) => options,
        // A policy's one-line text, as `Policy` prints it.
        DeValue::String(text) => {
            return match crate::policy::read(text) {
                Ok(policy) if problems.found.len() == before => Some(policy),
                Ok(_) => None,
                Err(why) => {
                    problems.push(table.span(), format!("{label}: {}: {why}", raw(table)));
                    None
                }
            };
        }
        _ => {
            problems.push(
                table.span(),
                format!(
                    "{label}: must be a table of options, like `[policies.{}]` followed by `algo = \"sliding_window\"`, \
                     or a policy's text, like `{} = \"sliding_window 10/1s precision 100ms\"`",
                    quote(name.get_ref().as_ref()),
                    quote(name.get_ref().as_ref())
                ),
            );
            return None;
        }
    };

    let mut algo = None;
    let mut dry_run = false;
    let mut headroom = (redlimit_grammar::Headroom::NONE, None);
    let mut spec = PolicySpec::new(AlgorithmKind::FixedWindow);
    // Where each parameter was written, and as what, for the messages of `validate`.
    let mut written: Vec<(Param, Range<usize>, String)> = Vec::new();
    // Parameters written but malformed (already reported): a placeholder
    // stands in, so the rules still run on the others without repeating them.
    let mut malformed: Vec<Param> = Vec::new();
    for (option, value) in options {
        let option_name = option.get_ref().as_ref();
        let text = raw(value);
        let mut fail = |message: String| problems.push(value.span(), format!("{label}: {message}"));
        let param = match option_name {
            "algo" => {
                match value.get_ref().as_str().map(AlgorithmKind::from_name) {
                    Some(Ok(kind)) => algo = Some(kind),
                    Some(Err(e)) => fail(format!("algo {text}: {e}")),
                    None => fail(format!("`algo` takes a string, like `algo = \"sliding_window\"`, not {text}")),
                }
                continue;
            }
            "dry_run" => {
                match value.get_ref().as_bool() {
                    Some(on) => dry_run = on,
                    None => fail(format!("`dry_run` takes true or false, like `dry_run = true`, not {text}")),
                }
                continue;
            }
            "headroom" => {
                match string(value, "headroom = \"low 50%, normal 20%\"")
                    .and_then(|s| redlimit_grammar::parse_headroom(s).map_err(|e| format!("headroom {text}: {e}")))
                {
                    Ok(read) => headroom = (read, Some(value.span())),
                    Err(m) => fail(m),
                }
                continue;
            }
            "strategies" => match string(value, "strategies = \"10/1s,100/1m\"").and_then(|s| {
                parse_strategies(s).map_err(|e| format!("strategies {text}: {}", unquoted(s, e.message())))
            }) {
                Ok(v) => {
                    spec.strategies = Some(v);
                    Param::Strategies
                }
                Err(m) => {
                    fail(m);
                    spec.strategies = Some(vec![redlimit_grammar::Strategy::new(1, 1_000_000)]);
                    malformed.push(Param::Strategies);
                    continue;
                }
            },
            "precision" => match string(value, "precision = \"100ms\"")
                .and_then(|s| parse_duration(s).map_err(|e| format!("precision {text}: {e}")))
            {
                Ok(v) => {
                    spec.precision = Some(v);
                    Param::Precision
                }
                Err(m) => {
                    fail(m);
                    spec.precision = Some(1);
                    malformed.push(Param::Precision);
                    continue;
                }
            },
            "rate" => match string(value, "rate = \"1/3s\"")
                .and_then(|s| parse_rate(s).map_err(|e| format!("rate {text}: {e}")))
            {
                Ok(v) => {
                    spec.rate = Some(v);
                    Param::Rate
                }
                Err(m) => {
                    fail(m);
                    spec.rate = Some(redlimit_grammar::Rate { count: 1, period_us: 1_000_000 });
                    malformed.push(Param::Rate);
                    continue;
                }
            },
            "refill" => match string(value, "refill = \"interval\"")
                .and_then(|s| Refill::from_name(s).map_err(|e| format!("refill {text}: {e}")))
            {
                Ok(v) => {
                    spec.refill = Some(v);
                    Param::Refill
                }
                Err(m) => {
                    fail(m);
                    spec.refill = Some(Refill::Continuous);
                    malformed.push(Param::Refill);
                    continue;
                }
            },
            "capacity" => match whole(value, "capacity = 10", 1, MAX_LIMIT) {
                Ok(v) => {
                    spec.capacity = Some(v);
                    Param::Capacity
                }
                Err(m) => {
                    fail(m);
                    spec.capacity = Some(1);
                    malformed.push(Param::Capacity);
                    continue;
                }
            },
            "burst" => match whole(value, "burst = 5", 0, MAX_LIMIT - 1) {
                Ok(v) => {
                    spec.burst = Some(v);
                    Param::Burst
                }
                Err(m) => {
                    fail(m);
                    spec.burst = Some(0);
                    malformed.push(Param::Burst);
                    continue;
                }
            },
            "limit" => match whole(value, "limit = 10", 1, MAX_LIMIT) {
                Ok(v) => {
                    spec.limit = Some(v);
                    Param::Limit
                }
                Err(m) => {
                    fail(m);
                    spec.limit = Some(1);
                    malformed.push(Param::Limit);
                    continue;
                }
            },
            "lease" => match string(value, "lease = \"30s\"")
                .and_then(|s| parse_duration(s).map_err(|e| format!("lease {text}: {e}")))
            {
                Ok(v) => {
                    spec.lease = Some(v);
                    Param::Lease
                }
                Err(m) => {
                    fail(m);
                    spec.lease = Some(1_000_000);
                    malformed.push(Param::Lease);
                    continue;
                }
            },
            other => {
                // Every policy option is matched above: the attribute's others belong to a call site.
                let message = if ATTRIBUTE_OPTIONS.contains(&other) {
                    format!("`{other}` is an option of the `#[rate_limit]` attribute, not of a policy: write it on the function; a policy takes {}", list(&POLICY_OPTIONS))
                } else {
                    format!("unknown option `{}`: a policy takes {}", quote(other), list(&POLICY_OPTIONS))
                };
                problems.push(option.span(), format!("{label}: {message}"));
                continue;
            }
        };
        written.push((param, value.span(), text));
    }

    let Some(kind) = algo else {
        if !options.iter().any(|(option, _)| option.get_ref() == "algo") {
            let names = AlgorithmKind::ALL.map(|k| format!("`{k}`")).join(", ");
            problems.push(
                name.span(),
                format!("{label}: missing `algo`: add e.g. `algo = \"sliding_window\"`; the algorithms are {names}"),
            );
        }
        return None;
    };
    spec.kind = kind;
    if let Err(errors) = spec.validate() {
        for (param, error) in errors {
            if param.is_some_and(|p| malformed.contains(&p)) {
                continue;
            }
            match param.and_then(|p| written.iter().find(|(w, ..)| *w == p)) {
                Some((param, span, text)) => {
                    problems.push(span.clone(), format!("{label}: {} {text}: {error}", param.name()))
                }
                None => problems.push(name.span(), format!("{label}: {error}")),
            }
        }
        return None;
    }
    if problems.found.len() > before {
        return None;
    }
    match Policy::from_spec(spec).map(|policy| policy.with_headroom_of(headroom.0)) {
        Ok(Ok(policy)) => Some(policy.with_dry_run(dry_run)),
        Ok(Err(e)) => {
            problems.push(headroom.1.unwrap_or_else(|| name.span()), format!("{label}: {e}"));
            None
        }
        Err(e) => {
            problems.push(name.span(), format!("{label}: {e}"));
            None
        }
    }
}

/// A grammar message without its leading `` `value`: `` when that repeats the whole value.
fn unquoted<'m>(value: &str, message: &'m str) -> &'m str {
    message.strip_prefix(&format!("`{}`: ", quote(value))).unwrap_or(message)
}

/// A value as the user wrote it, for messages (`"0/1s"`, `10`, `true`).
fn raw(value: &Spanned<DeValue<'_>>) -> String {
    match value.get_ref() {
        DeValue::String(s) => format!("\"{}\"", quote(s.as_ref())),
        DeValue::Integer(i) => quote(&i.to_string()).to_string(),
        DeValue::Float(f) => quote(&f.to_string()).to_string(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(_) => "an array".into(),
        DeValue::Table(_) => "a table".into(),
    }
}

fn string<'v>(value: &'v Spanned<DeValue<'_>>, example: &str) -> Result<&'v str, String> {
    value.get_ref().as_str().ok_or_else(|| {
        format!("`{}` takes a string, like `{example}`, not {}", example.split(' ').next().unwrap_or(""), raw(value))
    })
}

/// An integer option; one that is not even a `u64` is reported with the
/// option's real bounds, `min..=max` (the spec's rules check the rest).
fn whole(value: &Spanned<DeValue<'_>>, example: &str, min: u64, max: u64) -> Result<u64, String> {
    let option = example.split(' ').next().unwrap_or("");
    match value.get_ref() {
        DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix()).map_err(|_| {
            format!("{option} {}: must be a whole number from {min} to {max}, like `{example}`", raw(value))
        }),
        DeValue::String(_) => Err(format!("`{option}` takes an integer, not a string: write `{example}`")),
        _ => Err(format!("`{option}` takes an integer, like `{example}`, not {}", raw(value))),
    }
}

fn list(options: &[&str]) -> String {
    options.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_call_site_option_of_the_attribute_is_named_as_one() {
        for option in ["key", "priority", "refund_on", "settle", "prefetch", "crate"] {
            let text = format!("[policies.api]\nalgo = \"gcra\"\nrate = \"1/1s\"\n{option} = 1\n");
            let found = super::parse("policies.toml", &text).unwrap_err();
            let expected = format!("policies.toml:4: policy \"api\": `{option}` is an option of the `#[rate_limit]` attribute, not of a policy");
            assert!(found.len() == 1 && found[0].starts_with(&expected), "{found:?}");
        }
    }
}
