//! Priorities: the share of a policy's limit kept from each class of call,
//! written `low 50% normal 20%` (commas allowed between the two).

use crate::error::GrammarError;
use crate::spec::{AlgorithmKind, PolicySpec};
use std::fmt;

/// The word that opens a policy text's headroom (`fixed_window 10/1m headroom low 50%`).
pub const HEADROOM_WORD: &str = "headroom";

/// The class a call is decided as, under a policy with a [`Headroom`].
///
/// ```
/// use redlimit_grammar::Priority;
///
/// assert_eq!(Priority::default(), Priority::Normal);
/// assert_eq!("low".parse::<Priority>().unwrap(), Priority::Low);
/// assert_eq!(Priority::Critical.to_string(), "critical");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Priority {
    /// Passes only while more than the low headroom remains.
    Low,
    /// Passes only while more than the normal headroom remains (the default).
    #[default]
    Normal,
    /// Passes up to the whole limit.
    Critical,
}

impl Priority {
    /// Every class, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Normal, Priority::Critical];

    /// Its name in text: `low`, `normal`, `critical`.
    pub const fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::Critical => "critical",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Priority {
    type Err = GrammarError;

    fn from_str(text: &str) -> Result<Priority, GrammarError> {
        Priority::ALL.into_iter().find(|p| p.name() == text.trim()).ok_or_else(|| {
            GrammarError::new(format!(
                "unknown priority `{}`: expected `low`, `normal` or `critical`",
                crate::quote(text.trim())
            ))
        })
    }
}

/// The percent of a policy's limit kept from low and from normal calls
/// (critical calls may use all of it). A class's limit is
/// `floor(limit × (100 − percent) / 100)`, for every window's limit, a
/// bucket's capacity, GCRA's `burst + 1` and a concurrency limit.
///
/// ```
/// use redlimit_grammar::{parse_headroom, Headroom, Priority};
///
/// let h = parse_headroom("low 50%, normal 20%").unwrap();
/// assert_eq!((h.low(), h.normal()), (50, 20));
/// assert_eq!([Priority::Low, Priority::Normal, Priority::Critical].map(|p| h.class_limit(10, p)), [5, 8, 10]);
/// assert_eq!(h.to_string(), "low 50% normal 20%");
/// assert_eq!(Headroom::new(20, 50).unwrap_err().to_string(), "headroom: low calls must keep at least as much as normal ones (low 20% is below normal 50%)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headroom {
    low: u8,
    normal: u8,
}

impl Headroom {
    /// No headroom: every class decides by the whole limit.
    pub const NONE: Headroom = Headroom { low: 0, normal: 0 };

    /// Keeps `low` percent of the limit from low calls and `normal` percent from normal ones.
    pub fn new(low: u8, normal: u8) -> Result<Headroom, GrammarError> {
        for (class, percent) in [("low", low), ("normal", normal)] {
            if percent > 100 {
                return Err(GrammarError::new(format!(
                    "headroom: {class} {percent}% is more than the whole limit (at most 100%)"
                )));
            }
        }
        if low < normal {
            return Err(GrammarError::new(format!(
                "headroom: low calls must keep at least as much as normal ones (low {low}% is below normal {normal}%)"
            )));
        }
        Ok(Headroom { low, normal })
    }

    /// A headroom the `#[rate_limit]` macro checked with [`Headroom::new`]
    /// and [`Headroom::check`] at compile time, for its constant policy.
    #[doc(hidden)]
    pub const fn __validated(low: u8, normal: u8) -> Headroom {
        Headroom { low, normal }
    }

    /// The percent kept from low calls.
    pub const fn low(self) -> u8 {
        self.low
    }

    /// The percent kept from normal calls.
    pub const fn normal(self) -> u8 {
        self.normal
    }

    /// Whether every class decides by the whole limit.
    pub const fn is_none(self) -> bool {
        self.low == 0 && self.normal == 0
    }

    /// The percent kept from `class`.
    pub const fn percent(self, class: Priority) -> u8 {
        match class {
            Priority::Low => self.low,
            Priority::Normal => self.normal,
            Priority::Critical => 0,
        }
    }

    /// What `class` may use of `limit`: `floor(limit × (100 − percent) / 100)`.
    pub const fn class_limit(self, limit: u64, class: Priority) -> u64 {
        let kept = 100 - self.percent(class) as u128;
        (limit as u128 * kept / 100) as u64
    }

    /// Checks that every class keeps at least one permit of each of `spec`'s
    /// limits (a class left none could never pass).
    pub fn check(self, spec: &PolicySpec) -> Result<(), GrammarError> {
        limits(spec).into_iter().try_for_each(|(what, limit)| self.check_limit(what, limit))
    }

    /// Checks that every class keeps at least one permit of `limit`
    /// (named `what`, like `a capacity of`).
    pub fn check_limit(self, what: &str, limit: u64) -> Result<(), GrammarError> {
        match self.class_limit(limit, Priority::Low) {
            0 => Err(GrammarError::new(format!(
                "headroom: low {}% of {what} {limit} leaves low calls no permit; keep less, or raise the limit",
                self.low
            ))),
            _ => Ok(()),
        }
    }
}

/// Every limit a class's share is taken of: `(what it is called, its value)`.
fn limits(spec: &PolicySpec) -> Vec<(&'static str, u64)> {
    match spec.kind {
        AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog => {
            spec.strategies.iter().flatten().map(|s| ("a limit of", s.limit)).collect()
        }
        AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket => {
            spec.capacity.map(|c| ("a capacity of", c)).into_iter().collect()
        }
        AlgorithmKind::Gcra => {
            let burst = spec.burst.or_else(|| spec.rate.map(PolicySpec::default_burst));
            burst.map(|b| ("a limit (burst + 1) of", b.saturating_add(1))).into_iter().collect()
        }
        AlgorithmKind::Concurrency => spec.limit.map(|l| ("a limit of", l)).into_iter().collect(),
    }
}

impl fmt::Display for Headroom {
    /// `low 50% normal 20%`; a class that keeps nothing is left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for class in [Priority::Low, Priority::Normal] {
            let percent = self.percent(class);
            if percent > 0 {
                write!(f, "{}{class} {percent}%", if first { "" } else { " " })?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Reads a headroom: `low N%` and `normal N%`, each at most once, in that
/// order, separated by spaces or a comma. Normal calls not named keep
/// nothing; low calls not named keep what normal ones keep.
pub fn parse_headroom(text: &str) -> Result<Headroom, GrammarError> {
    let words: Vec<&str> = text.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).collect();
    let (headroom, used) = read_words(&words)?;
    match words.get(used) {
        None if used > 0 => Ok(headroom),
        None => Err(GrammarError::new("headroom: empty; write `low 50%, normal 20%`")),
        Some(word) => Err(GrammarError::new(format!(
            "headroom: unexpected `{}`: write `low 50%, normal 20%`",
            crate::quote(word)
        ))),
    }
}

/// Reads `low N%` then `normal N%` (each optional) from the front of
/// `words`: the headroom, and how many words it took.
pub(crate) fn read_words(words: &[&str]) -> Result<(Headroom, usize), GrammarError> {
    let mut percents = [None, None];
    let mut at = 0;
    for (i, class) in [Priority::Low, Priority::Normal].into_iter().enumerate() {
        if words.get(at) != Some(&class.name()) {
            continue;
        }
        let value = words.get(at + 1).copied().unwrap_or("");
        let percent = parse_percent(value).ok_or_else(|| {
            GrammarError::new(format!("headroom: `{class}` takes a percent like `20%`, not `{}`", crate::quote(value)))
        })?;
        percents[i] = Some(percent);
        at += 2;
    }
    let normal = percents[1].unwrap_or(0);
    Ok((Headroom::new(percents[0].unwrap_or(normal), normal)?, at))
}

fn parse_percent(text: &str) -> Option<u8> {
    let digits = text.strip_suffix('%')?;
    match digits.bytes().all(|b| b.is_ascii_digit()) && !digits.is_empty() && digits.len() <= 3 {
        true => digits.parse().ok(),
        false => None,
    }
}

/// Takes `headroom low N% normal N%` out of a policy's text: the text
/// without it, and the headroom it named (none when absent).
///
/// ```
/// use redlimit_grammar::split_headroom;
///
/// let (rest, h) = split_headroom("gcra 10/1s headroom low 50% dry_run").unwrap();
/// assert_eq!((rest.as_str(), h.low()), ("gcra 10/1s dry_run", 50));
/// ```
pub fn split_headroom(text: &str) -> Result<(String, Headroom), GrammarError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some(at) = words.iter().position(|w| *w == HEADROOM_WORD) else {
        return Ok((text.to_owned(), Headroom::NONE));
    };
    let (headroom, used) = read_words(&words[at + 1..])?;
    if used == 0 {
        return Err(GrammarError::new(
            "`headroom` takes `low N%` and/or `normal N%`, like `headroom low 50% normal 20%`",
        ));
    }
    let rest: Vec<&str> = words[..at].iter().chain(&words[at + 1 + used..]).copied().collect();
    if rest.contains(&HEADROOM_WORD) {
        return Err(GrammarError::new("`headroom` is given twice"));
    }
    Ok((rest.join(" "), headroom))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_it_cannot_read() {
        for (text, why) in [
            ("", "empty"),
            ("low 50", "takes a percent"),
            ("low 101%", "more than the whole limit"),
            ("normal 20% low 50%", "unexpected `low`"),
            ("high 5%", "unexpected `high`"),
            ("low 10%, normal 20%", "at least as much as normal"),
            ("low -1%", "takes a percent"),
        ] {
            let error = parse_headroom(text).unwrap_err().to_string();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn low_keeps_what_normal_keeps_unless_named() {
        assert_eq!(parse_headroom("normal 20%").unwrap(), Headroom { low: 20, normal: 20 });
        assert_eq!(parse_headroom("low 50%").unwrap(), Headroom { low: 50, normal: 0 });
        for h in [Headroom { low: 20, normal: 20 }, Headroom { low: 50, normal: 0 }, Headroom { low: 100, normal: 7 }] {
            assert_eq!(parse_headroom(&h.to_string()).unwrap(), h);
        }
    }
}
