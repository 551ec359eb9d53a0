//! Which parameters each algorithm takes, and the rules a whole policy must obey.

use crate::{check_duration, check_rate, check_strategy, GrammarError, Rate, Strategy, MAX_LIMIT};
use std::fmt;

/// At most this many strategies in one policy (`violated` is reported as a bit set).
pub const MAX_STRATEGIES: usize = 16;

/// Bucket arithmetic runs on integers scaled by the rate's period (see
/// [`Rate::reduced`]); every such product must stay at or below 2^52 so the
/// Redis scripts, which compute with doubles, stay exact.
pub const MAX_EXACT: u64 = 1 << 52;

/// Lease of a concurrency permit when none is given: a holder that dies
/// gives its permits back within this long.
pub const DEFAULT_LEASE_US: u64 = 30_000_000;

/// The longest lease a concurrency permit may be given: what one crashed
/// holder can keep from every other caller.
pub const MAX_LEASE_US: u64 = 24 * 3_600_000_000;

/// The shortest lease a concurrency permit may be given. A lease is renewed
/// every third of it, on a timer a busy runtime fires late, and a failed
/// renewal is tried again after pauses from 5 ms, at most a twentieth of the
/// lease apart: a shorter lease leaves no room for those retries, and a
/// renewal late by a few milliseconds would find it ended.
pub const MIN_LEASE_US: u64 = 100_000;

/// The seven algorithms, by the names the attribute and configuration use:
/// six that bound how often, and `concurrency`, which bounds how many at once.
///
/// ```
/// use redlimit_grammar::AlgorithmKind;
///
/// assert_eq!(AlgorithmKind::ALL.len(), 7);
/// assert_eq!(AlgorithmKind::from_name("gcra").unwrap(), AlgorithmKind::Gcra);
/// assert_eq!(AlgorithmKind::SlidingLog.name(), "sliding_log");
/// assert!(AlgorithmKind::from_name("bucket").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlgorithmKind {
    /// `fixed_window`
    FixedWindow,
    /// `sliding_window`
    SlidingWindow,
    /// `sliding_log`
    SlidingLog,
    /// `token_bucket`
    TokenBucket,
    /// `leaky_bucket`
    LeakyBucket,
    /// `gcra`
    Gcra,
    /// `concurrency`: at most `limit` permits held at once, each a lease
    Concurrency,
}

/// A policy parameter, as named in the attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// `strategies = "10/1s,100/1m"`
    Strategies,
    /// `precision = "100ms"`
    Precision,
    /// `capacity = 10`
    Capacity,
    /// `rate = "1/3s"`
    Rate,
    /// `burst = 5`
    Burst,
    /// `limit = 10`: permits held at once
    Limit,
    /// `lease = "30s"`: how long a permit lasts unless renewed
    Lease,
    /// `refill = "interval"`: a token bucket's whole rate added at once at
    /// the end of each period, instead of continuously
    Refill,
}

/// How a token bucket refills: continuously (the default), or its rate's
/// whole count at once each time a period ends (`refill = "interval"`).
///
/// Periods are counted on the clock, from the Unix epoch: a bucket of rate
/// `10/1m` gains 10 tokens on every minute boundary, whatever the key.
///
/// ```
/// use redlimit_grammar::Refill;
/// assert_eq!(Refill::from_name("interval").unwrap(), Refill::Interval);
/// assert!(Refill::from_name("hourly").unwrap_err().message().contains("`continuous`, `interval`"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Refill {
    /// `continuous`: one token every period / count, as soon as it is earned
    #[default]
    Continuous,
    /// `interval`: count tokens at once at the end of each period
    Interval,
}

impl Refill {
    /// Both, in the order documentation lists them.
    pub const ALL: [Refill; 2] = [Refill::Continuous, Refill::Interval];

    /// The name the attribute and a policy's text use.
    pub const fn name(self) -> &'static str {
        match self {
            Refill::Continuous => "continuous",
            Refill::Interval => "interval",
        }
    }

    /// Looks a refill up by name; the error lists the valid names.
    pub fn from_name(name: &str) -> Result<Refill, GrammarError> {
        Self::ALL.into_iter().find(|r| r.name() == name).ok_or_else(|| {
            GrammarError::new(format!(
                "unknown refill `{}`: expected one of `continuous`, `interval`",
                crate::quote(name)
            ))
        })
    }
}

impl fmt::Display for Refill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Param {
    /// Every parameter, in the order a policy's text writes them.
    pub const ALL: [Param; 8] = [
        Param::Strategies,
        Param::Precision,
        Param::Capacity,
        Param::Rate,
        Param::Refill,
        Param::Burst,
        Param::Limit,
        Param::Lease,
    ];

    /// The parameter's name in the attribute.
    pub const fn name(self) -> &'static str {
        match self {
            Param::Strategies => "strategies",
            Param::Precision => "precision",
            Param::Capacity => "capacity",
            Param::Rate => "rate",
            Param::Burst => "burst",
            Param::Limit => "limit",
            Param::Lease => "lease",
            Param::Refill => "refill",
        }
    }
}

impl AlgorithmKind {
    /// Every algorithm, in the order documentation lists them.
    pub const ALL: [AlgorithmKind; 7] = [
        AlgorithmKind::FixedWindow,
        AlgorithmKind::SlidingWindow,
        AlgorithmKind::SlidingLog,
        AlgorithmKind::TokenBucket,
        AlgorithmKind::LeakyBucket,
        AlgorithmKind::Gcra,
        AlgorithmKind::Concurrency,
    ];

    /// The algorithm's name: `"fixed_window"`, `"gcra"`, ...
    pub const fn name(self) -> &'static str {
        match self {
            AlgorithmKind::FixedWindow => "fixed_window",
            AlgorithmKind::SlidingWindow => "sliding_window",
            AlgorithmKind::SlidingLog => "sliding_log",
            AlgorithmKind::TokenBucket => "token_bucket",
            AlgorithmKind::LeakyBucket => "leaky_bucket",
            AlgorithmKind::Gcra => "gcra",
            AlgorithmKind::Concurrency => "concurrency",
        }
    }

    /// Looks an algorithm up by name; the error lists the valid names.
    ///
    /// ```
    /// use redlimit_grammar::AlgorithmKind;
    /// assert_eq!(AlgorithmKind::from_name("gcra").unwrap(), AlgorithmKind::Gcra);
    /// assert!(AlgorithmKind::from_name("fixed").unwrap_err().message().contains("fixed_window"));
    /// ```
    pub fn from_name(name: &str) -> Result<Self, GrammarError> {
        Self::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            GrammarError::new(format!(
                "unknown algorithm `{}`: expected one of {}",
                crate::quote(name),
                Self::ALL.map(|k| format!("`{}`", k.name())).join(", ")
            ))
        })
    }

    /// The parameters this algorithm accepts.
    pub const fn params(self) -> &'static [Param] {
        match self {
            AlgorithmKind::FixedWindow | AlgorithmKind::SlidingLog => &[Param::Strategies],
            AlgorithmKind::SlidingWindow => &[Param::Strategies, Param::Precision],
            AlgorithmKind::TokenBucket => &[Param::Capacity, Param::Rate, Param::Refill],
            AlgorithmKind::LeakyBucket => &[Param::Capacity, Param::Rate],
            AlgorithmKind::Gcra => &[Param::Rate, Param::Burst],
            AlgorithmKind::Concurrency => &[Param::Limit, Param::Lease],
        }
    }

    /// The parameters this algorithm cannot do without.
    pub const fn required(self) -> &'static [Param] {
        match self {
            AlgorithmKind::FixedWindow | AlgorithmKind::SlidingLog | AlgorithmKind::SlidingWindow => {
                &[Param::Strategies]
            }
            AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket => &[Param::Capacity, Param::Rate],
            AlgorithmKind::Gcra => &[Param::Rate],
            AlgorithmKind::Concurrency => &[Param::Limit],
        }
    }
}

impl fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy as written: an algorithm and whichever parameters were given.
///
/// [`PolicySpec::validate`] applies every rule and reports every problem, each
/// with the parameter it concerns (`None`: the algorithm itself), so the macro
/// can point at the offending token and show all mistakes in one build.
///
/// ```
/// use redlimit_grammar::{parse_strategies, AlgorithmKind, Param, PolicySpec};
///
/// let mut spec = PolicySpec::new(AlgorithmKind::SlidingWindow);
/// spec.strategies = Some(parse_strategies("10/1s").unwrap());
/// spec.precision = Some(300_000);
/// let errors = spec.validate().unwrap_err();
/// assert_eq!(errors[0].0, Some(Param::Precision));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySpec {
    /// The algorithm.
    pub kind: AlgorithmKind,
    /// `strategies`, for the window algorithms.
    pub strategies: Option<Vec<Strategy>>,
    /// `precision` in microseconds, for `sliding_window`.
    pub precision: Option<u64>,
    /// `capacity`, for the buckets.
    pub capacity: Option<u64>,
    /// `rate`, for the buckets and GCRA.
    pub rate: Option<Rate>,
    /// `burst`, for GCRA.
    pub burst: Option<u64>,
    /// `limit`, for concurrency: permits held at once.
    pub limit: Option<u64>,
    /// `lease` in microseconds, for concurrency ([`DEFAULT_LEASE_US`] when not given).
    pub lease: Option<u64>,
    /// `refill`, for the token bucket ([`Refill::Continuous`] when not given).
    pub refill: Option<Refill>,
}

impl PolicySpec {
    /// A spec with no parameters yet.
    pub fn new(kind: AlgorithmKind) -> Self {
        PolicySpec {
            kind,
            strategies: None,
            precision: None,
            capacity: None,
            rate: None,
            burst: None,
            limit: None,
            lease: None,
            refill: None,
        }
    }

    fn given(&self) -> Vec<Param> {
        let mut given = Vec::new();
        if self.strategies.is_some() {
            given.push(Param::Strategies);
        }
        if self.precision.is_some() {
            given.push(Param::Precision);
        }
        if self.capacity.is_some() {
            given.push(Param::Capacity);
        }
        if self.rate.is_some() {
            given.push(Param::Rate);
        }
        if self.burst.is_some() {
            given.push(Param::Burst);
        }
        if self.limit.is_some() {
            given.push(Param::Limit);
        }
        if self.lease.is_some() {
            given.push(Param::Lease);
        }
        if self.refill.is_some() {
            given.push(Param::Refill);
        }
        given
    }

    /// The sub-window length `sliding_window` uses when `precision` is not
    /// given: a tenth of the windows' greatest common divisor when that is
    /// whole, else the divisor itself.
    pub fn default_precision(strategies: &[Strategy]) -> u64 {
        let g = strategies.iter().fold(0, |g, s| gcd(g, s.window_us));
        if g % 10 == 0 {
            (g / 10).max(1)
        } else {
            g
        }
    }

    /// The burst GCRA uses when none is given: `count - 1`, so `rate = "10/1s"`
    /// admits ten calls at once, as governor's quotas do.
    pub fn default_burst(rate: Rate) -> u64 {
        // A count of 0 is rejected by `validate`; it must not underflow first.
        rate.count.saturating_sub(1)
    }

    /// Checks every rule; on failure returns every problem found.
    pub fn validate(&self) -> Result<(), Vec<(Option<Param>, GrammarError)>> {
        let mut errors = Vec::new();
        let kind = self.kind;
        let takes = kind.params();
        for param in self.given() {
            if param == Param::Refill && !takes.contains(&param) {
                errors.push((
                    Some(param),
                    GrammarError::new(format!(
                        "`refill` is the token bucket's: `{kind}` does not take it; use `algo = \"token_bucket\"` \
                         to add a rate's tokens at once each period"
                    )),
                ));
            } else if !takes.contains(&param) {
                errors.push((
                    Some(param),
                    GrammarError::new(format!(
                        "`{}` does not take `{}`; it takes {}",
                        kind,
                        param.name(),
                        takes.iter().map(|p| format!("`{}`", p.name())).collect::<Vec<_>>().join(", ")
                    )),
                ));
            }
        }
        let given = self.given();
        for param in kind.required() {
            if !given.contains(param) {
                errors.push((None, GrammarError::new(missing_message(kind, *param))));
            }
        }
        if let (Some(strategies), true) = (&self.strategies, takes.contains(&Param::Strategies)) {
            self.check_strategies(strategies, &mut errors);
        }
        // A malformed rate is reported once, and the rules built on it are skipped.
        let rate = match self.rate.filter(|_| takes.contains(&Param::Rate)).map(check_rate) {
            Some(Ok(rate)) => Some(rate),
            Some(Err(e)) => {
                errors.push((Some(Param::Rate), e));
                None
            }
            None => None,
        };
        if takes.contains(&Param::Capacity) {
            if let (Some(capacity), Some(rate)) = (self.capacity, rate) {
                check_bucket(capacity, rate, Param::Capacity, "capacity", &mut errors);
            }
        }
        if kind == AlgorithmKind::Gcra {
            if let Some(rate) = rate {
                let burst = self.burst.unwrap_or_else(|| Self::default_burst(rate));
                if burst >= MAX_LIMIT {
                    errors.push((
                        Some(Param::Burst),
                        GrammarError::new(format!(
                            "burst {burst} is too large; the largest allowed is {}",
                            MAX_LIMIT - 1
                        )),
                    ));
                } else {
                    check_bucket(burst + 1, rate, Param::Burst, "burst + 1", &mut errors);
                }
            }
        }
        if kind == AlgorithmKind::Concurrency {
            self.check_concurrency(&mut errors);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    fn check_concurrency(&self, errors: &mut Vec<(Option<Param>, GrammarError)>) {
        match self.limit {
            Some(0) => errors.push((
                Some(Param::Limit),
                GrammarError::new("a limit of 0 would deny every call; use at least 1".to_string()),
            )),
            Some(limit) if limit > MAX_LIMIT => errors.push((
                Some(Param::Limit),
                GrammarError::new(format!("limit {limit} is too large; the largest allowed is {MAX_LIMIT}")),
            )),
            _ => {}
        }
        match self.lease.map(check_duration) {
            Some(Err(e)) => errors.push((Some(Param::Lease), e)),
            Some(Ok(lease)) if lease > MAX_LEASE_US => errors.push((
                Some(Param::Lease),
                GrammarError::new(format!(
                    "a lease of {} is too long: a crashed holder would keep its permits that long; at most {}",
                    crate::format_duration(lease),
                    crate::format_duration(MAX_LEASE_US)
                )),
            )),
            Some(Ok(lease)) if lease < MIN_LEASE_US => errors.push((
                Some(Param::Lease),
                GrammarError::new(format!(
                    "a lease of {} is too short to be renewed while the call runs (renewed every third of it, \
                     retried from 5 ms apart after a failure); use at least {}",
                    crate::format_duration(lease),
                    crate::format_duration(MIN_LEASE_US)
                )),
            )),
            _ => {}
        }
    }

    fn check_strategies(&self, strategies: &[Strategy], errors: &mut Vec<(Option<Param>, GrammarError)>) {
        let strategies_error = |message: String| (Some(Param::Strategies), GrammarError::new(message));
        if strategies.is_empty() {
            errors.push(strategies_error("no strategies: write at least one `limit/window`, like `10/1s`".into()));
            return;
        }
        if strategies.len() > MAX_STRATEGIES {
            errors.push(strategies_error(format!(
                "{} strategies given; at most {MAX_STRATEGIES} are allowed",
                strategies.len()
            )));
            // Per-strategy rules would report once per strategy: as many as were given.
            return;
        }
        // Built from numbers rather than parsed, a strategy may break the grammar;
        // the rules below divide by its window, so they need a valid one.
        if let Some(e) = strategies.iter().find_map(|s| check_strategy(*s).err()) {
            errors.push((Some(Param::Strategies), e));
            return;
        }
        if self.kind != AlgorithmKind::FixedWindow {
            if let Some(s) = strategies.iter().find(|s| s.calendar.is_some()) {
                errors.push(strategies_error(format!(
                    "`{s}` is a calendar window, which only `fixed_window` keeps: use `algo = \"fixed_window\"`, \
                     or a rolling window without `@`"
                )));
                return;
            }
        }
        if self.kind == AlgorithmKind::SlidingWindow {
            let precision = match self.precision.map(check_duration) {
                None => Self::default_precision(strategies),
                Some(Ok(precision)) => precision,
                Some(Err(e)) => {
                    errors.push((Some(Param::Precision), e));
                    return;
                }
            };
            for s in strategies {
                if s.window_us % precision != 0 {
                    errors.push((
                        Some(Param::Precision),
                        GrammarError::new(format!(
                            "precision {} does not divide the window of `{s}`: pick a precision that divides every window",
                            crate::format_duration(precision)
                        )),
                    ));
                } else if s.window_us / precision > 10_000 {
                    errors.push((
                        Some(Param::Precision),
                        GrammarError::new(format!(
                            "precision {} splits `{s}` into {} sub-windows; at most 10000 are allowed",
                            crate::format_duration(precision),
                            s.window_us / precision
                        )),
                    ));
                }
            }
        }
    }
}

fn missing_message(kind: AlgorithmKind, param: Param) -> String {
    let example = match param {
        Param::Strategies => "strategies = \"10/1s\"",
        Param::Precision => "precision = \"100ms\"",
        Param::Capacity => "capacity = 10",
        Param::Rate => "rate = \"1/1s\"",
        Param::Burst => "burst = 5",
        Param::Limit => "limit = 10",
        Param::Lease => "lease = \"30s\"",
        Param::Refill => "refill = \"interval\"",
    };
    format!("`{kind}` needs `{}`: add e.g. `{example}`", param.name())
}

fn check_bucket(size: u64, rate: Rate, param: Param, what: &str, errors: &mut Vec<(Option<Param>, GrammarError)>) {
    if size == 0 {
        errors.push((Some(param), GrammarError::new(format!("{what} of 0 would deny every call; use at least 1"))));
        return;
    }
    if size > MAX_LIMIT {
        errors.push((
            Some(param),
            GrammarError::new(format!("{what} {size} is too large; the largest allowed is {MAX_LIMIT}")),
        ));
        return;
    }
    let (count, period) = rate.reduced();
    if (size as u128) * (period as u128) > MAX_EXACT as u128 || count > MAX_EXACT {
        errors.push((
            Some(param),
            GrammarError::new(format!(
                "{what} {size} at rate {rate} is too large to compute exactly (size × period must stay under 2^52 µs); use a shorter period or a smaller {what}"
            )),
        ));
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
