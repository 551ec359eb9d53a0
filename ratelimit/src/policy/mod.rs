//! [`Policy`]: an algorithm with its validated parameters.

mod headroom;
mod text;

pub(crate) use text::read;

use crate::error::Error;
use redlimit_grammar::{parse_rate, parse_strategies, AlgorithmKind, Param, PolicySpec};
pub use redlimit_grammar::{Calendar, CalendarUnit, Headroom, Priority, Rate, Refill, Strategy};
use std::borrow::Cow;
use std::sync::Arc;

/// An algorithm with its validated parameters.
///
/// Build one with the constructor named after the algorithm; each applies the
/// same rules (the shared `redlimit-grammar` crate) that `#[rate_limit]`
/// applies at compile time.
///
/// ```
/// use redlimit::Policy;
///
/// let p = Policy::sliding_log("10/1s,100/1m").unwrap();
/// assert_eq!(p.strategies().len(), 2);
/// assert_eq!(p.to_string(), "sliding_log 10/1s,100/1m");
///
/// let err = Policy::fixed_window("0/1s").unwrap_err();
/// assert!(err.to_string().contains("a limit of 0 would deny every call"));
/// ```
#[derive(Clone)]
pub struct Policy {
    pub(crate) params: Params,
    /// A bucket's or GCRA's rate in lowest terms ([`Rate::reduced`]),
    /// computed once here rather than on every decision; `(1, 1)` for windows.
    pub(crate) reduced_rate: (u64, u64),
    /// The name it was configured under (see [`Policy::name`]).
    name: Option<Arc<str>>,
    /// Decided and recorded, never enforced (see [`Policy::with_dry_run`]).
    dry_run: bool,
    /// The share of the limit kept from each class of call (see [`Policy::with_headroom`]).
    pub(crate) headroom: Headroom,
}

/// Equal when they limit alike: the configured name is a label, not a rule.
impl PartialEq for Policy {
    fn eq(&self, other: &Policy) -> bool {
        self.params == other.params && self.headroom == other.headroom
    }
}

impl Eq for Policy {}

/// The validated parameters of each algorithm. Bucket rates are kept as given;
/// the arithmetic uses [`Rate::reduced`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Params {
    FixedWindow {
        strategies: Cow<'static, [Strategy]>,
    },
    SlidingWindow {
        strategies: Cow<'static, [Strategy]>,
        precision_us: u64,
    },
    SlidingLog {
        strategies: Cow<'static, [Strategy]>,
    },
    TokenBucket {
        capacity: u64,
        rate: Rate,
        refill: Refill,
    },
    LeakyBucket {
        capacity: u64,
        rate: Rate,
    },
    Gcra {
        rate: Rate,
        burst: u64,
    },
    /// At most `limit` permits held at once, each lasting `lease_us` unless renewed.
    Concurrency {
        limit: u64,
        lease_us: u64,
    },
}

impl Policy {
    pub(crate) const fn new(params: Params) -> Policy {
        let reduced_rate = match &params {
            Params::TokenBucket { rate, .. } | Params::LeakyBucket { rate, .. } | Params::Gcra { rate, .. } => {
                rate.reduced()
            }
            Params::FixedWindow { .. }
            | Params::SlidingWindow { .. }
            | Params::SlidingLog { .. }
            | Params::Concurrency { .. } => (1, 1),
        };
        Policy { params, reduced_rate, name: None, dry_run: false, headroom: Headroom::NONE }
    }

    /// The name this policy was configured under, when it came from a
    /// [`PolicySet`](crate::policies::PolicySet) (`policies::get`, a named
    /// layer or `#[rate_limit(policy = "...")]`); `None` when built in code.
    /// HTTP header fields name their items after it.
    ///
    /// ```
    /// use redlimit::policies::PolicySet;
    ///
    /// let set = PolicySet::parse("inline", "[policies.search]\nalgo = \"gcra\"\nrate = \"1/1s\"\n")?;
    /// assert_eq!(set.get("search").unwrap().name(), Some("search"));
    /// assert_eq!(redlimit::Policy::gcra("1/1s", 0)?.name(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The same policy in dry run (shadow mode): every limiter deciding by it
    /// decides and records as usual, but a call it would deny passes
    /// (`Limiter::limit`, `wait`, annotated functions and layers never deny
    /// it), counted in `redlimit_dry_run_denials_total` and logged. So a new
    /// limit can be tried on real traffic. A policy file says it with
    /// `dry_run = true`. Like the name, not part of equality.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    ///
    /// let trial = Policy::fixed_window("1/1m")?.with_dry_run(true);
    /// let limiter = Limiter::new("trial", trial, &Store::memory().with_clock(ManualClock::new()));
    /// limiter.limit("ann", 1).await.unwrap();
    /// let would_deny = limiter.limit("ann", 1).await.expect("a dry run never denies");
    /// assert!(!would_deny.allowed, "the decision still says it would have denied");
    /// # Ok(()) }
    /// ```
    pub fn with_dry_run(mut self, on: bool) -> Policy {
        self.dry_run = on;
        self
    }

    /// Whether this policy is in dry run ([`Policy::with_dry_run`]).
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// The same policy, labelled with the name it is configured under.
    pub(crate) fn with_name(mut self, name: &str) -> Policy {
        self.name = Some(Arc::from(name));
        self
    }

    /// A fixed window per strategy, started by a key's first hit, or, for a
    /// calendar strategy (`1000/1d@Europe/Paris`; units `1d`, `1w`, `1mo`,
    /// `1y`), the day, ISO week, month or year of a time zone holding the
    /// call ([calendar windows](crate::guide::calendar)).
    ///
    /// On Redis with its own clock (the default), a policy of one strategy
    /// whose limit is below 2^20 and window below 2^32 ms is a counter whose
    /// TTL is the window (the script `lua/fixed_window_counter.lua`):
    /// Redis times it in milliseconds, so the window lasts from W to W + 1 ms
    /// (`reset_after` is the key's PTTL, `retry_after` 1 ms more, rounded
    /// up). Everywhere else (several strategies, larger numbers, a client
    /// clock, the memory store) windows are exact to the microsecond:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::new("api", Policy::fixed_window("2/1s")?, &Store::memory().with_clock(clock.clone()));
    /// limiter.check("k", 1).await?;
    /// clock.advance(Duration::from_millis(300));
    /// assert_eq!(limiter.check("k", 1).await?.reset_after, Duration::from_millis(700));
    /// assert_eq!(limiter.check("k", 1).await?.retry_after, Some(Duration::from_millis(700)));
    /// clock.advance(Duration::from_millis(700));
    /// assert_eq!(limiter.check("k", 1).await?.remaining, 1, "a new window");
    /// # Ok(()) }
    /// ```
    pub fn fixed_window(strategies: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::FixedWindow);
        spec.strategies = Some(strategies_param(strategies)?);
        Policy::from_spec(spec)
    }

    /// A sliding window approximated by sub-windows of `precision` (e.g. `"100ms"`).
    ///
    /// ```
    /// let p = redlimit::Policy::sliding_window("10/1s", "100ms").unwrap();
    /// assert!(redlimit::Policy::sliding_window("10/1s", "300ms").is_err());
    /// # drop(p);
    /// ```
    pub fn sliding_window(strategies: &str, precision: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::SlidingWindow);
        spec.strategies = Some(strategies_param(strategies)?);
        spec.precision =
            Some(redlimit_grammar::parse_duration(precision).map_err(|e| param_error(Param::Precision, e))?);
        Policy::from_spec(spec)
    }

    /// An exact sliding log of admitted hits.
    pub fn sliding_log(strategies: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::SlidingLog);
        spec.strategies = Some(strategies_param(strategies)?);
        Policy::from_spec(spec)
    }

    /// A token bucket of `capacity` tokens, starting full, refilled at `rate` (e.g. `"1/3s"`).
    pub fn token_bucket(capacity: u64, rate: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::TokenBucket);
        spec.capacity = Some(capacity);
        spec.rate = Some(parse_rate(rate).map_err(|e| param_error(Param::Rate, e))?);
        Policy::from_spec(spec)
    }

    /// A token bucket of `capacity` tokens, starting full, that gains its
    /// `rate`'s whole count at once each time a period ends (bucket4j's
    /// interval refill), never above `capacity`: `"10/1m"` adds 10 tokens
    /// on every minute. Periods are counted on the clock from the Unix
    /// epoch, so every key refills at the same instants, and `retry_after`
    /// and `reset_after` name a period's end.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, ManualClock, Policy, Store};
    /// use std::time::Duration;
    ///
    /// let policy = Policy::token_bucket_interval(10, "10/1m")?;
    /// assert_eq!(policy.to_string(), "token_bucket capacity 10 rate 10/1m refill interval");
    /// let clock = ManualClock::new(); // on a minute boundary
    /// let limiter = Limiter::new("exports", policy, &Store::memory().with_clock(clock.clone()));
    /// limiter.check("k", 10).await?;
    /// clock.advance(Duration::from_secs(59));
    /// let denied = limiter.check("k", 1).await?;
    /// assert_eq!(denied.retry_after, Some(Duration::from_secs(1)), "nothing comes back before the minute ends");
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.check("k", 1).await?.remaining, 9, "all ten at once");
    /// # Ok(()) }
    /// ```
    pub fn token_bucket_interval(capacity: u64, rate: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::TokenBucket);
        spec.capacity = Some(capacity);
        spec.rate = Some(parse_rate(rate).map_err(|e| param_error(Param::Rate, e))?);
        spec.refill = Some(Refill::Interval);
        Policy::from_spec(spec)
    }

    /// A leaky bucket of `capacity`, starting empty, drained at `rate`.
    pub fn leaky_bucket(capacity: u64, rate: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::LeakyBucket);
        spec.capacity = Some(capacity);
        spec.rate = Some(parse_rate(rate).map_err(|e| param_error(Param::Rate, e))?);
        Policy::from_spec(spec)
    }

    /// GCRA with redis-cell's semantics: `rate` and `burst` (limit = burst + 1).
    ///
    /// ```
    /// let p = redlimit::Policy::gcra("1/1s", 4).unwrap();
    /// assert_eq!(p.to_string(), "gcra 1/1s burst 4");
    /// ```
    pub fn gcra(rate: &str, burst: u64) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::Gcra);
        spec.rate = Some(parse_rate(rate).map_err(|e| param_error(Param::Rate, e))?);
        spec.burst = Some(burst);
        Policy::from_spec(spec)
    }

    /// At most `limit` calls of one key at once, across every process sharing
    /// the store: a call holds a permit ([`Limiter::acquire`](crate::Limiter::acquire))
    /// until it ends. A permit is a lease of `lease` (e.g. `"30s"`), renewed
    /// while its holder lives, so a crashed holder's permits come back once
    /// their lease runs out. A lease is from 100 ms (renewed every third of
    /// it, a shorter one could not be kept) to 24 hours.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
    /// use redlimit::{Limiter, Policy, Store};
    ///
    /// let policy = Policy::concurrency(2, "30s")?;
    /// assert_eq!(policy.to_string(), "concurrency limit 2 lease 30s");
    /// let limiter = Limiter::new("exports", policy, &Store::memory());
    /// let first = limiter.acquire("tenant-1").await.unwrap();
    /// let second = limiter.acquire("tenant-1").await.unwrap();
    /// assert_eq!(second.decision().remaining, 0);
    /// assert!(limiter.acquire("tenant-1").await.is_err(), "two are held");
    /// drop(first);
    /// assert!(limiter.acquire("tenant-1").await.is_ok(), "one was given back");
    /// # drop(second); Ok(()) }
    /// ```
    ///
    /// ```
    /// use redlimit::Policy;
    ///
    /// let error = Policy::concurrency(2, "50ms").unwrap_err().to_string();
    /// assert!(error.contains("a lease of 50ms is too short to be renewed"), "{error}");
    /// assert!(Policy::concurrency(2, "100ms").is_ok());
    /// ```
    pub fn concurrency(limit: u64, lease: &str) -> Result<Policy, Error> {
        let mut spec = PolicySpec::new(AlgorithmKind::Concurrency);
        spec.limit = Some(limit);
        spec.lease = Some(redlimit_grammar::parse_duration(lease).map_err(|e| param_error(Param::Lease, e))?);
        Policy::from_spec(spec)
    }

    /// Builds a policy from a spec, applying every rule: a spec built from
    /// numbers meets the rules text meets, with the same messages.
    ///
    /// ```
    /// use redlimit::{AlgorithmKind, Policy, Strategy};
    /// use redlimit::PolicySpec;
    ///
    /// let mut spec = PolicySpec::new(AlgorithmKind::FixedWindow);
    /// spec.strategies = Some(vec![Strategy::new(10, 0)]);
    /// let err = Policy::from_spec(spec).unwrap_err().to_string();
    /// assert_eq!(err, "invalid rate limit policy: `10/0s`: duration `0s` is zero: a window or period must be longer than zero");
    /// assert!(Policy::fixed_window("10/0s").unwrap_err().to_string().ends_with(&err[27..]));
    /// ```
    pub fn from_spec(spec: PolicySpec) -> Result<Policy, Error> {
        if let Err(errors) = spec.validate() {
            let message = errors.iter().map(|(_, e)| e.to_string()).collect::<Vec<_>>().join("; ");
            return Err(Error::InvalidPolicy(message));
        }
        let strategies = || Cow::Owned(spec.strategies.clone().unwrap_or_default());
        let params = match spec.kind {
            AlgorithmKind::FixedWindow => Params::FixedWindow { strategies: strategies() },
            AlgorithmKind::SlidingLog => Params::SlidingLog { strategies: strategies() },
            AlgorithmKind::SlidingWindow => Params::SlidingWindow {
                precision_us: spec
                    .precision
                    .unwrap_or_else(|| PolicySpec::default_precision(spec.strategies.as_deref().unwrap_or(&[]))),
                strategies: strategies(),
            },
            AlgorithmKind::Concurrency => Params::Concurrency {
                limit: spec.limit.unwrap_or(0),
                lease_us: spec.lease.unwrap_or(redlimit_grammar::DEFAULT_LEASE_US),
            },
            kind => {
                // `validate` requires a rate of the buckets and GCRA.
                let Some(rate) = spec.rate else {
                    return Err(Error::InvalidPolicy(format!("`{kind}` needs `rate`")));
                };
                match kind {
                    AlgorithmKind::TokenBucket => Params::TokenBucket {
                        capacity: spec.capacity.unwrap_or(0),
                        rate,
                        refill: spec.refill.unwrap_or_default(),
                    },
                    AlgorithmKind::LeakyBucket => Params::LeakyBucket { capacity: spec.capacity.unwrap_or(0), rate },
                    _ => Params::Gcra { rate, burst: spec.burst.unwrap_or_else(|| PolicySpec::default_burst(rate)) },
                }
            }
        };
        Ok(Policy::new(params))
    }

    /// How a token bucket refills; `None` for the other algorithms.
    pub fn refill(&self) -> Option<Refill> {
        match self.params {
            Params::TokenBucket { refill, .. } => Some(refill),
            _ => None,
        }
    }

    /// The µs a bucket's refill steps by: 1 for a continuous one, the
    /// period for an interval refill, whose tokens come only on its ends.
    pub(crate) fn refill_step(&self) -> u64 {
        match self.params {
            Params::TokenBucket { refill: Refill::Interval, rate, .. } => rate.period_us,
            _ => 1,
        }
    }

    /// Which algorithm this policy runs.
    pub fn algorithm(&self) -> AlgorithmKind {
        match self.params {
            Params::FixedWindow { .. } => AlgorithmKind::FixedWindow,
            Params::SlidingWindow { .. } => AlgorithmKind::SlidingWindow,
            Params::SlidingLog { .. } => AlgorithmKind::SlidingLog,
            Params::TokenBucket { .. } => AlgorithmKind::TokenBucket,
            Params::LeakyBucket { .. } => AlgorithmKind::LeakyBucket,
            Params::Gcra { .. } => AlgorithmKind::Gcra,
            Params::Concurrency { .. } => AlgorithmKind::Concurrency,
        }
    }

    /// How long a concurrency permit lasts unless its holder renews it;
    /// `None` for the algorithms that bound how often.
    pub fn lease(&self) -> Option<std::time::Duration> {
        match self.params {
            Params::Concurrency { lease_us, .. } => Some(std::time::Duration::from_micros(lease_us)),
            _ => None,
        }
    }

    /// The strategies of a window algorithm in declared order (empty for buckets and GCRA).
    pub fn strategies(&self) -> &[Strategy] {
        match &self.params {
            Params::FixedWindow { strategies }
            | Params::SlidingLog { strategies }
            | Params::SlidingWindow { strategies, .. } => strategies,
            _ => &[],
        }
    }

    /// A hash of what the policy limits (its configured name left out, as
    /// in equality): tells denials remembered under one policy from another's.
    pub(crate) fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.params.hash(&mut hasher);
        hasher.finish()
    }

    /// The most permits one call could ever take: a larger cost is never admitted.
    pub fn max_cost(&self) -> u64 {
        match &self.params {
            Params::TokenBucket { capacity, .. } | Params::LeakyBucket { capacity, .. } => *capacity,
            Params::Gcra { burst, .. } => burst.saturating_add(1),
            Params::Concurrency { limit, .. } => *limit,
            _ => self.strategies().iter().map(|s| s.limit).min().unwrap_or(0),
        }
    }
}

fn strategies_param(text: &str) -> Result<Vec<Strategy>, Error> {
    parse_strategies(text).map_err(|e| param_error(Param::Strategies, e))
}

fn param_error(param: Param, error: redlimit_grammar::GrammarError) -> Error {
    Error::InvalidPolicy(format!("`{}`: {error}", param.name()))
}
