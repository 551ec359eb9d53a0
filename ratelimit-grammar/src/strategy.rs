//! `L/W` strategies (`10/1s`) and `N/P` rates (`1/3s`).

use crate::calendar::{parse_calendar, zoneless_hint};
use crate::{check_duration, format_duration, parse_duration, quote, Calendar, GrammarError};
use std::fmt;

/// The largest `L` in `L/W`, the largest capacity, burst or rate count: 2^40.
///
/// Counts are compared and added as doubles inside Redis; staying far below
/// 2^53 keeps every sum exact.
pub const MAX_LIMIT: u64 = 1 << 40;

/// One window rule: at most `limit` permits in any window of `window_us`
/// microseconds or, for a calendar strategy (`1000/1d@Europe/Paris`), in
/// each day, week, month or year of a time zone.
///
/// ```
/// let s = redlimit_grammar::parse_strategy("10/1s").unwrap();
/// assert_eq!((s.limit, s.window_us, s.calendar), (10, 1_000_000, None));
/// assert_eq!(s.to_string(), "10/1s");
/// assert_eq!(s, redlimit_grammar::Strategy::new(10, 1_000_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Strategy {
    /// Permits per window.
    pub limit: u64,
    /// Window length in microseconds; for a calendar strategy, the longest
    /// its window can be ([`CalendarUnit::longest_us`](crate::CalendarUnit::longest_us)).
    pub window_us: u64,
    /// The calendar its windows follow, or `None` for a window started by
    /// a key's first hit.
    pub calendar: Option<Calendar>,
}

impl Strategy {
    /// At most `limit` permits in a window of `window_us` µs started by a key's first hit.
    pub const fn new(limit: u64, window_us: u64) -> Strategy {
        Strategy { limit, window_us, calendar: None }
    }

    /// At most `limit` permits in each window of `calendar`.
    pub const fn per_calendar(limit: u64, calendar: Calendar) -> Strategy {
        Strategy { limit, window_us: calendar.unit.longest_us(), calendar: Some(calendar) }
    }
}

/// A refill or drain rate: `count` units every `period_us` microseconds.
///
/// ```
/// let r = redlimit_grammar::parse_rate("1/3s").unwrap();
/// assert_eq!((r.count, r.period_us), (1, 3_000_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Units per period.
    pub count: u64,
    /// Period length in microseconds.
    pub period_us: u64,
}

impl Rate {
    /// The same rate as a fraction in lowest terms: `1000/1s` becomes `(1, 1000)`
    /// (one unit every 1000 µs). Integer arithmetic on the reduced pair is exact.
    pub const fn reduced(self) -> (u64, u64) {
        let g = gcd(self.count, self.period_us);
        (self.count / g, self.period_us / g)
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    if a == 0 {
        1
    } else {
        a
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.calendar {
            Some(calendar) => write!(f, "{}/{calendar}", self.limit),
            None => write!(f, "{}/{}", self.limit, format_duration(self.window_us)),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, format_duration(self.period_us))
    }
}

/// Splits `N/duration` and checks `N`; `what` names the number in messages.
fn parse_fraction(text: &str, what: &str) -> Result<(u64, u64), GrammarError> {
    let text = text.trim();
    let shown = quote(text);
    let Some((count, duration)) = text.split_once('/') else {
        return Err(GrammarError::new(format!(
            "`{shown}` is not of the form `{what}/duration`: write it like `10/1s` or `100/1m`"
        )));
    };
    let count = count.trim();
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GrammarError::new(format!(
            "`{shown}`: the {what} `{}` must be a whole number, like `10/1s`",
            quote(count)
        )));
    }
    // Too many digits for a u64 is as much "too large" as any number above the bound.
    let count = check_count(&shown, what, count.parse().unwrap_or(u64::MAX))?;
    let window = parse_duration(duration).map_err(|e| GrammarError::new(format!("`{shown}`: {e}")))?;
    Ok((count, window))
}

/// `count` as the `N` of `N/duration`, or why it cannot be; `shown` is the whole fraction.
fn check_count(shown: &dyn fmt::Display, what: &str, count: u64) -> Result<u64, GrammarError> {
    if count > MAX_LIMIT {
        return Err(GrammarError::new(format!(
            "`{shown}`: the {what} is too large; the largest allowed is {MAX_LIMIT}"
        )));
    }
    if count == 0 {
        return Err(GrammarError::new(format!("`{shown}`: a {what} of 0 would deny every call; use at least 1")));
    }
    Ok(count)
}

/// Checks a strategy built from numbers, with the messages [`parse_strategy`]
/// gives for the same strategy written out.
///
/// ```
/// use redlimit_grammar::{check_strategy, parse_strategy, Strategy};
///
/// let zero = Strategy::new(0, 1_000_000);
/// assert_eq!(check_strategy(zero).unwrap_err(), parse_strategy("0/1s").unwrap_err());
/// let instant = Strategy::new(10, 0);
/// assert_eq!(check_strategy(instant).unwrap_err(), parse_strategy("10/0s").unwrap_err());
/// ```
pub fn check_strategy(strategy: Strategy) -> Result<Strategy, GrammarError> {
    if let Some(calendar) = strategy.calendar {
        check_count(&strategy, "limit", strategy.limit)?;
        let valid = Calendar::new(calendar.unit, calendar.zone)?;
        if valid.zone != calendar.zone || strategy.window_us != calendar.unit.longest_us() {
            return Err(GrammarError::new(format!(
                "`{strategy}`: build a calendar strategy with `Strategy::per_calendar` and `Calendar::new`"
            )));
        }
        return Ok(strategy);
    }
    check_fraction(strategy.limit, strategy.window_us, "limit").map(|_| strategy)
}

/// Checks a rate built from numbers, with the messages [`parse_rate`] gives
/// for the same rate written out.
///
/// ```
/// use redlimit_grammar::{check_rate, Rate};
/// let never = Rate { count: 0, period_us: 1_000_000 };
/// assert_eq!(check_rate(never).unwrap_err().message(), "`0/1s`: a count of 0 would deny every call; use at least 1");
/// ```
pub fn check_rate(rate: Rate) -> Result<Rate, GrammarError> {
    check_fraction(rate.count, rate.period_us, "count").map(|_| rate)
}

fn check_fraction(count: u64, us: u64, what: &str) -> Result<(), GrammarError> {
    let shown = format!("{count}/{}", format_duration(us));
    check_count(&shown, what, count)?;
    check_duration(us).map_err(|e| GrammarError::new(format!("`{shown}`: {e}")))?;
    Ok(())
}

/// Parses one strategy, `L/W`, or a calendar one, `L/1d@Zone` (units `d`,
/// `w`, `mo`, `y`; the zone an IANA name).
pub fn parse_strategy(text: &str) -> Result<Strategy, GrammarError> {
    let shown = quote(text.trim()).to_string();
    if let Some((fraction, zone)) = text.split_once('@') {
        let (limit, window) = fraction.split_once('/').unwrap_or((fraction, ""));
        let limit = limit.trim();
        if limit.is_empty() || !limit.bytes().all(|b| b.is_ascii_digit()) {
            return Err(GrammarError::new(format!(
                "`{shown}`: the limit `{}` must be a whole number, like `1000/1d@Europe/Paris`",
                quote(limit)
            )));
        }
        let limit = check_count(&shown, "limit", limit.parse().unwrap_or(u64::MAX))?;
        return Ok(Strategy::per_calendar(limit, parse_calendar(window, zone, &shown)?));
    }
    let (limit, window_us) = match parse_fraction(text, "limit") {
        Ok(fraction) => fraction,
        Err(e) => return Err(text.split_once('/').and_then(|(_, w)| zoneless_hint(w, &shown)).unwrap_or(e)),
    };
    Ok(Strategy::new(limit, window_us))
}

/// Parses a comma-separated list of strategies, `10/1s,100/1m`, in declared order.
pub fn parse_strategies(text: &str) -> Result<Vec<Strategy>, GrammarError> {
    if text.trim().is_empty() {
        return Err(GrammarError::new(
            "no strategies: write at least one `limit/window`, like `10/1s` or `10/1s,100/1m`",
        ));
    }
    let items: Vec<&str> = text.split(',').collect();
    if let Some(i) = items.iter().position(|item| item.trim().is_empty()) {
        let place =
            if i == 0 { "before the first `,`".to_string() } else { format!("after `{}`", quote(items[i - 1].trim())) };
        return Err(GrammarError::new(format!(
            "empty strategy {place} in `{}`: remove the extra comma",
            quote(text.trim())
        )));
    }
    items.into_iter().map(parse_strategy).collect()
}

/// Parses a rate, `N/P` (`1/3s`: one unit every three seconds).
pub fn parse_rate(text: &str) -> Result<Rate, GrammarError> {
    let (count, period_us) = parse_fraction(text, "count")?;
    Ok(Rate { count, period_us })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_in_declared_order() {
        let s = parse_strategies("10/1s, 100/1m").unwrap();
        assert_eq!(s, vec![Strategy::new(10, 1_000_000), Strategy::new(100, 60_000_000)]);
    }

    #[test]
    fn rejects_malformed_strategies() {
        for (text, needle) in [
            ("10/1x", "unknown duration unit"),
            ("0/1s", "of 0"),
            ("10/0s", "zero"),
            ("10", "not of the form"),
            ("", "no strategies"),
            ("10/1s,", "empty strategy after `10/1s`"),
            (",10/1s", "empty strategy before the first `,`"),
            ("a/1s", "whole number"),
            ("18446744073709551615/1s", "too large"),
            ("1/100000d", "too long"),
        ] {
            let err = parse_strategies(text).unwrap_err();
            assert!(err.message().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn reduces_rates_to_lowest_terms() {
        assert_eq!(parse_rate("1000/1s").unwrap().reduced(), (1, 1_000));
        assert_eq!(parse_rate("3/1s").unwrap().reduced(), (3, 1_000_000));
        assert_eq!(parse_rate("1/3s").unwrap().to_string(), "1/3s");
    }
}
