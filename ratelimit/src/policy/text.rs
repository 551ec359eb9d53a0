//! How a [`Policy`] prints and reads back: `Display` writes the policy's
//! text (`token_bucket capacity 40 rate 1/1m`), which errors, logs, the 429
//! body and a policies file all use, and `FromStr` reads it with the
//! grammar crate's `parse_policy`; `Debug` shows its fields.

use crate::error::Error;
use crate::policy::{Params, Policy};
use redlimit_grammar::{quote, Refill, Strategy, DRY_RUN_WORD, HEADROOM_WORD};
use std::fmt;
use std::str::FromStr;

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("params", &self.params)
            .field("reduced_rate", &self.reduced_rate)
            .field("name", &self.name())
            .field("dry_run", &self.is_dry_run())
            .field("headroom", &self.headroom())
            .finish()
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.algorithm())?;
        match &self.params {
            Params::FixedWindow { strategies } | Params::SlidingLog { strategies } => write_strategies(f, strategies),
            Params::SlidingWindow { strategies, precision_us } => {
                write_strategies(f, strategies)?;
                write!(f, " precision {}", redlimit_grammar::format_duration(*precision_us))
            }
            Params::TokenBucket { capacity, rate, refill: Refill::Interval } => {
                write!(f, "capacity {capacity} rate {rate} refill {}", Refill::Interval)
            }
            Params::TokenBucket { capacity, rate, .. } | Params::LeakyBucket { capacity, rate } => {
                write!(f, "capacity {capacity} rate {rate}")
            }
            Params::Gcra { rate, burst } => write!(f, "{rate} burst {burst}"),
            Params::Concurrency { limit, lease_us } => {
                write!(f, "limit {limit} lease {}", redlimit_grammar::format_duration(*lease_us))
            }
        }?;
        if !self.headroom().is_none() {
            write!(f, " {HEADROOM_WORD} {}", self.headroom())?;
        }
        match self.is_dry_run() {
            true => write!(f, " {DRY_RUN_WORD}"),
            false => Ok(()),
        }
    }
}

/// Reads what `Display` writes, and the same with the defaults left out
/// (`gcra 10/1s`, `concurrency limit 3`) or every parameter named
/// (`gcra rate 10/1s burst 9`), a headroom after the parameters
/// (`headroom low 50% normal 20%`, [`Policy::with_headroom`]); the rules
/// are the constructors'.
///
/// ```
/// use redlimit::Policy;
///
/// let policy: Policy = "token_bucket capacity 40 rate 1/1m".parse()?;
/// assert_eq!(policy, Policy::token_bucket(40, "1/1m")?);
/// assert_eq!(policy.to_string().parse::<Policy>()?, policy);
///
/// let error = "token_bucket 40 per 1/1m".parse::<Policy>().unwrap_err().to_string();
/// assert!(error.starts_with("invalid rate limit policy: `token_bucket 40 per 1/1m`: unexpected `40`"), "{error}");
/// # Ok::<(), redlimit::Error>(())
/// ```
impl FromStr for Policy {
    type Err = Error;

    fn from_str(text: &str) -> Result<Policy, Error> {
        read(text).map_err(|why| Error::InvalidPolicy(format!("`{}`: {why}", quote(text.trim()))))
    }
}

/// A policy's text read, or why not (every rule it breaks): what `FromStr`
/// and a policies file's one-line policies say.
pub(crate) fn read(text: &str) -> Result<Policy, String> {
    let (text, headroom) = redlimit_grammar::split_headroom(text).map_err(|e| e.to_string())?;
    let read = redlimit_grammar::parse_policy(&text).map_err(|e| e.to_string())?;
    match Policy::from_spec(read.spec).and_then(|policy| policy.with_headroom_of(headroom)) {
        Ok(policy) => Ok(policy.with_dry_run(read.dry_run)),
        Err(Error::InvalidPolicy(why)) => Err(why),
        Err(other) => Err(other.to_string()),
    }
}

fn write_strategies(f: &mut fmt::Formatter<'_>, strategies: &[Strategy]) -> fmt::Result {
    for (i, s) in strategies.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{s}")?;
    }
    Ok(())
}
