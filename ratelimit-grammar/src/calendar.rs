//! Calendar windows: `1d@Europe/Paris`, a day, ISO week, month or year of a
//! named IANA time zone, from the zone's own midnight to the next one.
//!
//! The zones come from the time-zone database bundled into `jiff`, never from
//! the system's, so a window's bounds are the same on every machine.

use crate::{quote, GrammarError};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Mutex;

/// The unit of a calendar window: one day, ISO week (from Monday), month or year.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    /// `d`: from midnight to midnight, 23 or 25 hours on a day the clocks change.
    Day,
    /// `w`: from Monday's midnight to the next Monday's (ISO 8601 weeks).
    Week,
    /// `mo`: from the first of the month to the first of the next.
    Month,
    /// `y`: from the first of January to the next.
    Year,
}

impl CalendarUnit {
    /// Every unit, as the attribute writes them.
    pub const ALL: [CalendarUnit; 4] = [CalendarUnit::Day, CalendarUnit::Week, CalendarUnit::Month, CalendarUnit::Year];

    /// The unit as written after the count: `d`, `w`, `mo`, `y`.
    pub const fn name(self) -> &'static str {
        match self {
            CalendarUnit::Day => "d",
            CalendarUnit::Week => "w",
            CalendarUnit::Month => "mo",
            CalendarUnit::Year => "y",
        }
    }

    /// The longest such window can be, in µs: its longest calendar length
    /// and two hours, the most a clock change has added to a day (some zones
    /// move by two). What the strategy's `window_us` says, for what needs a
    /// length before knowing the date (the `w` of a `RateLimit-Policy` field).
    ///
    /// ```
    /// use redlimit_grammar::CalendarUnit;
    /// assert_eq!(CalendarUnit::Day.longest_us(), 26 * 3_600_000_000);
    /// ```
    pub const fn longest_us(self) -> u64 {
        const HOUR: u64 = 3_600_000_000;
        const DAY: u64 = 24 * HOUR;
        let days = match self {
            CalendarUnit::Day => 1,
            CalendarUnit::Week => 7,
            CalendarUnit::Month => 31,
            CalendarUnit::Year => 366,
        };
        days * DAY + 2 * HOUR
    }

    fn span(self) -> Span {
        match self {
            CalendarUnit::Day => Span::new().days(1),
            CalendarUnit::Week => Span::new().weeks(1),
            CalendarUnit::Month => Span::new().months(1),
            CalendarUnit::Year => Span::new().years(1),
        }
    }

    /// The first day of the window holding `date`.
    fn first_day(self, date: Date) -> Result<Date, jiff::Error> {
        match self {
            CalendarUnit::Day => Ok(date),
            CalendarUnit::Week => date.checked_sub(Span::new().days(date.weekday().to_monday_zero_offset())),
            CalendarUnit::Month => Ok(date.first_of_month()),
            CalendarUnit::Year => Ok(date.first_of_year()),
        }
    }
}

/// How many calendar windows each thread remembers (a policy's strategies, a few limiters').
const RECENT_WINDOWS: usize = 8;

/// A calendar window: its unit and its time zone's IANA name.
///
/// ```
/// use redlimit_grammar::{parse_strategy, CalendarUnit};
///
/// let s = parse_strategy("1000/1d@Europe/Paris").unwrap();
/// let calendar = s.calendar.unwrap();
/// assert_eq!((calendar.unit, calendar.zone), (CalendarUnit::Day, "Europe/Paris"));
/// // 2026-03-29, the spring-forward day in Paris, lasts 23 hours.
/// let noon = 1_774_782_000_000_000; // 2026-03-29T11:00:00Z
/// let (start, end) = calendar.window_at(noon).unwrap();
/// assert_eq!(end - start, 23 * 3_600_000_000);
/// assert_eq!(start, 1_774_738_800_000_000, "midnight in Paris, 23:00 UTC the day before");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Calendar {
    /// Day, week, month or year.
    pub unit: CalendarUnit,
    /// The IANA name of its time zone, as the bundled database spells it
    /// (`Europe/Paris`, `UTC`).
    pub zone: &'static str,
}

impl Calendar {
    /// A calendar window of `unit` in the zone named `zone`, looked up in the
    /// bundled time-zone database (case-insensitively).
    ///
    /// ```
    /// use redlimit_grammar::{Calendar, CalendarUnit};
    ///
    /// assert_eq!(Calendar::new(CalendarUnit::Month, "america/new_york").unwrap().zone, "America/New_York");
    /// assert!(Calendar::new(CalendarUnit::Day, "Mars/Olympus").unwrap_err().message().contains("unknown time zone"));
    /// ```
    pub fn new(unit: CalendarUnit, zone: &str) -> Result<Calendar, GrammarError> {
        let found = TimeZone::get(zone).ok().and_then(|tz| tz.iana_name().map(intern));
        let Some(zone) = found else {
            return Err(GrammarError::new(format!(
                "unknown time zone `{}`: write an IANA name such as `Europe/Paris`, `America/New_York` or `UTC`",
                quote(zone)
            )));
        };
        Ok(Calendar { unit, zone })
    }

    /// The window holding `now_us` (µs since the Unix epoch): its start and
    /// end, µs since the epoch, half-open. `None` only for a time the
    /// database cannot place (beyond the year 9999) or a zone it no longer
    /// has, neither of which a validated calendar meets before 2^52 µs.
    pub fn window_at(self, now_us: u64) -> Option<(u64, u64)> {
        // A window serves every call until its end: each thread keeps the
        // last few it worked out, so a decision rarely consults the database.
        thread_local! {
            static RECENT: RefCell<[Option<(Calendar, u64, u64)>; RECENT_WINDOWS]> = const { RefCell::new([None; RECENT_WINDOWS]) };
        }
        let holds = |&(calendar, start, end): &(Calendar, u64, u64)| calendar == self && (start..end).contains(&now_us);
        if let Some((_, start, end)) = RECENT.with(|recent| recent.borrow().iter().flatten().copied().find(holds)) {
            return Some((start, end));
        }
        let (start, end) = self.work_out(now_us)?;
        RECENT.with(|recent| {
            let mut recent = recent.borrow_mut();
            recent.rotate_right(1);
            recent[0] = Some((self, start, end));
        });
        Some((start, end))
    }

    fn work_out(self, now_us: u64) -> Option<(u64, u64)> {
        let tz = TimeZone::get(self.zone).ok()?;
        let now = Timestamp::from_microsecond(i64::try_from(now_us).ok()?).ok()?;
        let first = self.unit.first_day(now.to_zoned_datetime(tz.clone()).date()).ok()?;
        let next = first.checked_add(self.unit.span()).ok()?;
        // A midnight skipped by a clock change starts the day when the clock lands.
        let at = |day: Date| -> Option<u64> {
            let start = day.to_zoned_datetime(tz.clone()).ok()?.start_of_day().ok()?;
            u64::try_from(start.timestamp().as_microsecond()).ok()
        };
        Some((at(first)?, at(next)?))
    }
}

impl fmt::Display for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1{}@{}", self.unit.name(), self.zone)
    }
}

/// One `'static` copy of each zone name: a strategy stays `Copy` and
/// constant, and the names are bounded by the database's.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Reads the window of a calendar strategy, `1d` in `1000/1d@Europe/Paris`,
/// in zone `zone`; `shown` is the whole strategy, for messages.
pub(crate) fn parse_calendar(window: &str, zone: &str, shown: &str) -> Result<Calendar, GrammarError> {
    let window = window.trim();
    let digits = window.bytes().take_while(u8::is_ascii_digit).count();
    let (count, unit) = window.split_at(digits);
    let Some(unit) = CalendarUnit::ALL.into_iter().find(|u| u.name() == unit) else {
        return Err(GrammarError::new(format!(
            "`{shown}`: a calendar window is one of `1d`, `1w`, `1mo`, `1y` before `@`, like `1000/1d@Europe/Paris`"
        )));
    };
    if !(count.is_empty() || count == "1") {
        return Err(GrammarError::new(format!(
            "`{shown}`: a calendar window is one {}: write `1{}@{}`; for a longer span use a rolling window without `@`",
            unit_word(unit),
            unit.name(),
            quote(zone.trim())
        )));
    }
    Calendar::new(unit, zone.trim()).map_err(|e| GrammarError::new(format!("`{shown}`: {e}")))
}

fn unit_word(unit: CalendarUnit) -> &'static str {
    match unit {
        CalendarUnit::Day => "day",
        CalendarUnit::Week => "week",
        CalendarUnit::Month => "month",
        CalendarUnit::Year => "year",
    }
}

/// A hint for a calendar unit written without a zone (`10/1mo`), if `window` is one.
pub(crate) fn zoneless_hint(window: &str, shown: &str) -> Option<GrammarError> {
    let unit = window.trim().trim_start_matches(|c: char| c.is_ascii_digit());
    matches!(unit, "w" | "mo" | "y").then(|| {
        GrammarError::new(format!(
            "`{shown}`: `{unit}` is a calendar unit: name its time zone, like `{}@UTC` or `{}@Europe/Paris`",
            quote(shown),
            quote(shown)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000_000;

    fn us(text: &str) -> u64 {
        text.parse::<Timestamp>().unwrap().as_microsecond() as u64
    }

    fn window(unit: CalendarUnit, zone: &str, at: &str) -> (u64, u64) {
        Calendar::new(unit, zone).unwrap().window_at(us(at)).unwrap()
    }

    #[test]
    fn days_follow_the_zones_clock_changes() {
        use CalendarUnit::Day;
        // Spring forward: 23 hours; fall back: 25; both hemispheres.
        assert_eq!(
            window(Day, "Europe/Paris", "2026-03-29T12:00:00Z"),
            (us("2026-03-28T23:00:00Z"), us("2026-03-29T22:00:00Z"))
        );
        assert_eq!(
            window(Day, "Europe/Paris", "2026-10-25T12:00:00Z"),
            (us("2026-10-24T22:00:00Z"), us("2026-10-25T23:00:00Z"))
        );
        let (s, e) = window(Day, "America/New_York", "2026-03-08T12:00:00Z");
        assert_eq!((s, e - s), (us("2026-03-08T05:00:00Z"), 23 * HOUR));
        let (s, e) = window(Day, "America/New_York", "2026-11-01T12:00:00Z");
        assert_eq!((s, e - s), (us("2026-11-01T04:00:00Z"), 25 * HOUR));
        let (s, e) = window(Day, "Australia/Sydney", "2026-04-05T00:00:00Z");
        assert_eq!((s, e - s), (us("2026-04-04T13:00:00Z"), 25 * HOUR));
    }

    #[test]
    fn a_remembered_window_serves_until_its_end_and_no_later() {
        let day = Calendar::new(CalendarUnit::Day, "Europe/Paris").unwrap();
        let (start, end) = day.window_at(us("2026-03-29T12:00:00Z")).unwrap();
        assert_eq!(day.window_at(end - 1), Some((start, end)));
        assert_eq!(day.window_at(end), Some((end, us("2026-03-30T22:00:00Z"))));
        assert_eq!(day.window_at(start - 1).map(|w| w.1), Some(start));
        let utc = Calendar::new(CalendarUnit::Day, "UTC").unwrap();
        assert_eq!(
            utc.window_at(end),
            Some((us("2026-03-29T00:00:00Z"), us("2026-03-30T00:00:00Z"))),
            "another zone's own"
        );
    }

    #[test]
    fn months_weeks_and_years_have_their_calendar_lengths() {
        use CalendarUnit::*;
        let days = |(s, e): (u64, u64)| (e - s) / (24 * HOUR);
        assert_eq!(days(window(Month, "UTC", "2028-02-10T00:00:00Z")), 29, "a leap year's February");
        assert_eq!(days(window(Month, "UTC", "2027-02-10T00:00:00Z")), 28);
        assert_eq!(window(Month, "UTC", "2026-12-31T23:59:59Z").1, us("2027-01-01T00:00:00Z"));
        assert_eq!(window(Year, "UTC", "2028-06-01T00:00:00Z").1 - us("2028-01-01T00:00:00Z"), 366 * 24 * HOUR);
        // 2026-01-01 is a Thursday: its ISO week began on Monday 2025-12-29.
        assert_eq!(
            window(Week, "UTC", "2026-01-01T00:00:00Z"),
            (us("2025-12-29T00:00:00Z"), us("2026-01-05T00:00:00Z"))
        );
    }

    #[test]
    fn calendar_strategies_read_and_refuse_clearly() {
        for (text, needle) in [
            ("10/2d@UTC", "a calendar window is one day: write `1d@UTC`"),
            ("10/1h@UTC", "one of `1d`, `1w`, `1mo`, `1y`"),
            ("10/1d@Mars/Base", "unknown time zone `Mars/Base`"),
            ("10/1mo", "`mo` is a calendar unit"),
        ] {
            let error = crate::parse_strategy(text).unwrap_err();
            assert!(error.message().contains(needle), "{text}: {error}");
        }
        let s = crate::parse_strategy("10/d@europe/paris").unwrap();
        assert_eq!(s.to_string(), "10/1d@Europe/Paris");
        assert_eq!(crate::parse_strategy(&s.to_string()).unwrap(), s);
    }
}
