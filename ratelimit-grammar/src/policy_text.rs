//! A whole policy in one line of text, `token_bucket capacity 40 rate 1/1m`:
//! what the runtime's `Policy` prints, and parses back.

use crate::{
    parse_duration, parse_rate, parse_strategies, quote, AlgorithmKind, GrammarError, Param, PolicySpec, Refill,
};

/// The word that puts a policy in dry run, last in its text.
pub const DRY_RUN_WORD: &str = "dry_run";

/// A policy read from its text: its spec, and whether it ends in `dry_run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyText {
    /// The algorithm and the parameters written.
    pub spec: PolicySpec,
    /// The text ended in `dry_run`.
    pub dry_run: bool,
}

/// Reads a policy's text: its algorithm, then each parameter by its
/// attribute name and value (`capacity 40`, `lease 30s`), and `dry_run`
/// last if it is in dry run. The window algorithms' strategies and GCRA's
/// rate may come first without their name, as `Policy`'s `Display` writes
/// them (`sliding_log 10/1s,100/1m`, `gcra 1/1s burst 4`). Syntax only:
/// [`PolicySpec::validate`] applies the rules.
///
/// ```
/// use redlimit_grammar::{parse_policy, AlgorithmKind, Rate};
///
/// let text = parse_policy("token_bucket capacity 40 rate 1/1m").unwrap();
/// assert_eq!(text.spec.kind, AlgorithmKind::TokenBucket);
/// assert_eq!((text.spec.capacity, text.spec.rate), (Some(40), Some(Rate { count: 1, period_us: 60_000_000 })));
///
/// let error = parse_policy("token_bucket 40 per 1/1m").unwrap_err();
/// assert!(error.message().contains("write it like `token_bucket capacity 10 rate 1/1s`"), "{error}");
/// ```
pub fn parse_policy(text: &str) -> Result<PolicyText, GrammarError> {
    let mut words = text.split_whitespace().peekable();
    let Some(algo) = words.next() else {
        return Err(GrammarError::new(format!(
            "an empty policy: write the algorithm and its parameters, like `{}`",
            policy_example(AlgorithmKind::SlidingWindow)
        )));
    };
    let kind = AlgorithmKind::from_name(algo)?;
    let mut spec = PolicySpec::new(kind);
    let mut dry_run = false;
    let mut first = true;
    while let Some(word) = words.next() {
        if dry_run {
            return Err(unexpected(kind, word, "nothing follows `dry_run`"));
        }
        if word == DRY_RUN_WORD {
            dry_run = true;
            continue;
        }
        let (param, value) = match param_named(word) {
            Some(param) => match words.next().filter(|value| *value != DRY_RUN_WORD && param_named(value).is_none()) {
                Some(value) => (param, value.to_string()),
                None => {
                    return Err(GrammarError::new(format!(
                        "`{}` without a value: write it like `{}`",
                        param.name(),
                        policy_example(kind)
                    )))
                }
            },
            None => match (first, positional(kind)) {
                // Strategies may be written with spaces after their commas.
                (true, Some(param)) => {
                    let mut value = word.to_string();
                    while let Some(more) = words.next_if(|w| value.ends_with(',') || w.starts_with(',')) {
                        value.push_str(more);
                    }
                    (param, value)
                }
                _ => return Err(unexpected(kind, word, "")),
            },
        };
        first = false;
        if !kind.params().contains(&param) {
            return Err(unexpected(kind, word, ""));
        }
        set(&mut spec, param, &value)?;
    }
    Ok(PolicyText { spec, dry_run })
}

/// The parameter an algorithm's text may give without its name, first.
const fn positional(kind: AlgorithmKind) -> Option<Param> {
    match kind {
        AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog => {
            Some(Param::Strategies)
        }
        AlgorithmKind::Gcra => Some(Param::Rate),
        _ => None,
    }
}

fn param_named(word: &str) -> Option<Param> {
    Param::ALL.into_iter().find(|p| p.name() == word)
}

/// A policy of `kind` in its text, as an error shows how to write one.
pub fn policy_example(kind: AlgorithmKind) -> &'static str {
    match kind {
        AlgorithmKind::FixedWindow => "fixed_window 10/1s,100/1m",
        AlgorithmKind::SlidingWindow => "sliding_window 10/1s precision 100ms",
        AlgorithmKind::SlidingLog => "sliding_log 10/1s,100/1m",
        AlgorithmKind::TokenBucket => "token_bucket capacity 10 rate 1/1s",
        AlgorithmKind::LeakyBucket => "leaky_bucket capacity 10 rate 1/1s",
        AlgorithmKind::Gcra => "gcra 10/1s burst 4",
        AlgorithmKind::Concurrency => "concurrency limit 10 lease 30s",
    }
}

fn unexpected(kind: AlgorithmKind, word: &str, why: &str) -> GrammarError {
    let takes = kind.params().iter().map(|p| format!("`{}`", p.name())).collect::<Vec<_>>().join(", ");
    let why = match why {
        "" => format!("`{kind}` takes {takes}, each followed by its value, and `dry_run` last"),
        why => why.to_string(),
    };
    GrammarError::new(format!("unexpected `{}`: {why}; write it like `{}`", quote(word), policy_example(kind)))
}

fn set(spec: &mut PolicySpec, param: Param, value: &str) -> Result<(), GrammarError> {
    let named = |e: GrammarError| GrammarError::new(format!("`{}`: {e}", param.name()));
    let whole = || {
        value.parse::<u64>().map_err(|_| {
            GrammarError::new(format!(
                "`{}` takes a whole number, like `{} 10`, not `{}`",
                param.name(),
                param.name(),
                quote(value)
            ))
        })
    };
    let given = match param {
        Param::Strategies => spec.strategies.replace(parse_strategies(value).map_err(named)?).is_some(),
        Param::Precision => spec.precision.replace(parse_duration(value).map_err(named)?).is_some(),
        Param::Capacity => spec.capacity.replace(whole()?).is_some(),
        Param::Rate => spec.rate.replace(parse_rate(value).map_err(named)?).is_some(),
        Param::Burst => spec.burst.replace(whole()?).is_some(),
        Param::Limit => spec.limit.replace(whole()?).is_some(),
        Param::Lease => spec.lease.replace(parse_duration(value).map_err(named)?).is_some(),
        Param::Refill => spec.refill.replace(Refill::from_name(value).map_err(named)?).is_some(),
    };
    match given {
        true => Err(GrammarError::new(format!("`{}` is given twice", param.name()))),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads() {
        let read = |text: &str| parse_policy(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(read("sliding_log 10/1s, 100/1m").spec.strategies.unwrap().len(), 2);
        assert_eq!(read("sliding_log strategies 10/1s,100/1m").spec.strategies.unwrap().len(), 2);
        assert_eq!(read("gcra rate 1/1s burst 4").spec.burst, Some(4));
        assert_eq!(read("  gcra\t1/1s  ").spec.burst, None);
        assert!(read("fixed_window 1/1m dry_run").dry_run);
        assert_eq!(read("concurrency lease 1m limit 2").spec.limit, Some(2));
        assert_eq!(read("token_bucket capacity 10 rate 10/1m refill interval").spec.refill, Some(Refill::Interval));
    }

    #[test]
    fn every_mistake_says_what_to_write() {
        for (text, needle) in [
            ("", "an empty policy"),
            ("bucket 1/1s", "unknown algorithm `bucket`"),
            ("token_bucket 40 per 1/1m", "unexpected `40`: `token_bucket` takes `capacity`, `rate`"),
            ("token_bucket capacity", "`capacity` without a value"),
            ("token_bucket capacity rate 1/1s", "`capacity` without a value"),
            ("token_bucket capacity forty rate 1/1s", "takes a whole number, like `capacity 10`, not `forty`"),
            ("gcra 1/1s 1/1s", "unexpected `1/1s`"),
            ("gcra 1/1s rate 2/1s", "`rate` is given twice"),
            ("gcra 1/1s limit 3", "unexpected `limit`"),
            ("gcra 1/1x", "`rate`: `1/1x`: unknown duration unit"),
            ("fixed_window 1/1s dry_run 1", "nothing follows `dry_run`"),
            ("fixed_window 1/1s,", "empty strategy after `1/1s`"),
            ("concurrency 3", "unexpected `3`"),
            ("token_bucket capacity 1 rate 1/1s refill hourly", "`refill`: unknown refill `hourly`"),
            ("leaky_bucket capacity 1 rate 1/1s refill interval", "unexpected `refill`"),
            ("sliding_window 10/1s precision soon", "`precision`: unknown duration unit"),
        ] {
            let error = parse_policy(text).unwrap_err();
            assert!(error.message().contains(needle), "{text:?}: {error}");
        }
    }
}
