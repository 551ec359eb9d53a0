//! Durations as written in policies: `500ms`, `1s`, `1m`, `1h`, `1d` (and `us`).

use crate::{quote, GrammarError};
use std::fmt;

/// The longest window or period a policy may use: 366 days, in microseconds.
///
/// Times are integer microseconds and Redis scripts compute with doubles, so
/// `now + window` must stay far below 2^53.
pub const MAX_DURATION_US: u64 = 366 * 86_400 * 1_000_000;

const UNITS: &[(&str, u64)] =
    &[("us", 1), ("ms", 1_000), ("s", 1_000_000), ("m", 60_000_000), ("h", 3_600_000_000), ("d", 86_400_000_000)];

/// Parses `500ms`, `1s`, `2m`, `1h`, `1d` or `250us` into microseconds.
///
/// A missing number means one (`s` is `1s`), so `10/s` reads naturally.
///
/// ```
/// assert_eq!(redlimit_grammar::parse_duration("1m").unwrap(), 60_000_000);
/// assert!(redlimit_grammar::parse_duration("1x").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<u64, GrammarError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(GrammarError::new(
            "empty duration: write a number and a unit, like `500ms`, `1s`, `1m`, `1h` or `1d`",
        ));
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let &(_, scale) = UNITS.iter().find(|(name, _)| *name == unit).ok_or_else(|| {
        GrammarError::new(format!(
            "unknown duration unit in `{}`: use one of `us`, `ms`, `s`, `m`, `h`, `d` (e.g. `500ms`, `1s`)",
            quote(text)
        ))
    })?;
    let count: u64 = if number.is_empty() {
        1
    } else {
        number.parse().map_err(|_| {
            GrammarError::new(format!("duration `{}` is too large: the longest allowed is 366d", quote(text)))
        })?
    };
    in_range(&quote(text), count.checked_mul(scale))
}

/// Checks a window or period given in microseconds, with the messages
/// [`parse_duration`] gives for the same duration written out.
///
/// ```
/// use redlimit_grammar::check_duration;
/// assert_eq!(check_duration(1_000_000).unwrap(), 1_000_000);
/// assert!(check_duration(0).unwrap_err().message().contains("`0s` is zero"));
/// assert!(check_duration(u64::MAX).unwrap_err().message().contains("too long"));
/// ```
pub fn check_duration(us: u64) -> Result<u64, GrammarError> {
    in_range(&format_duration(us), Some(us))
}

/// `us` (`None`: it overflowed) as a duration, or why it cannot be one.
fn in_range(shown: &dyn fmt::Display, us: Option<u64>) -> Result<u64, GrammarError> {
    match us {
        Some(0) => {
            Err(GrammarError::new(format!("duration `{shown}` is zero: a window or period must be longer than zero")))
        }
        Some(us) if us <= MAX_DURATION_US => Ok(us),
        _ => Err(GrammarError::new(format!("duration `{shown}` is too long: the longest allowed is 366d"))),
    }
}

/// Writes microseconds back in the largest unit that divides them exactly.
///
/// ```
/// assert_eq!(redlimit_grammar::format_duration(60_000_000), "1m");
/// assert_eq!(redlimit_grammar::format_duration(1_500_000), "1500ms");
/// ```
pub fn format_duration(us: u64) -> String {
    if us == 0 {
        return "0s".into();
    }
    let (name, scale) = UNITS.iter().rev().find(|(_, scale)| us % scale == 0).copied().unwrap_or(("us", 1));
    format!("{}{name}", us / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("250us").unwrap(), 250);
        assert_eq!(parse_duration("500ms").unwrap(), 500_000);
        assert_eq!(parse_duration("3s").unwrap(), 3_000_000);
        assert_eq!(parse_duration("2m").unwrap(), 120_000_000);
        assert_eq!(parse_duration("1h").unwrap(), 3_600_000_000);
        assert_eq!(parse_duration("1d").unwrap(), 86_400_000_000);
        assert_eq!(parse_duration("s").unwrap(), 1_000_000);
    }

    #[test]
    fn rejects_bad_durations_with_reasons() {
        assert!(parse_duration("0s").unwrap_err().message().contains("zero"));
        assert!(parse_duration("1x").unwrap_err().message().contains("unknown duration unit"));
        assert!(parse_duration("").unwrap_err().message().contains("empty"));
        assert!(parse_duration("367d").unwrap_err().message().contains("too long"));
        assert!(parse_duration("99999999999999999999999s").unwrap_err().message().contains("too large"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1.5s").is_err());
    }

    #[test]
    fn formats_round_trip() {
        for text in ["1s", "500ms", "1m", "1h", "1d", "7us", "90s"] {
            assert_eq!(
                parse_duration(&format_duration(parse_duration(text).unwrap())).unwrap(),
                parse_duration(text).unwrap()
            );
        }
        assert_eq!(format_duration(90_000_000), "90s");
    }
}
