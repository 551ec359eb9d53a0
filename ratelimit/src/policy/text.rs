//! How a [`Policy`] prints: `Display` in the policy grammar's own words
//! (what errors, logs and the HTTP fields' docs show), `Debug` for its fields.

use crate::policy::{Params, Policy};
use redlimit_grammar::Strategy;
use std::fmt;

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("params", &self.params)
            .field("reduced_rate", &self.reduced_rate)
            .field("name", &self.name())
            .field("dry_run", &self.is_dry_run())
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
            Params::TokenBucket { capacity, rate } | Params::LeakyBucket { capacity, rate } => {
                write!(f, "capacity {capacity} rate {rate}")
            }
            Params::Gcra { rate, burst } => write!(f, "{rate} burst {burst}"),
            Params::Concurrency { limit, lease_us } => {
                write!(f, "limit {limit} lease {}", redlimit_grammar::format_duration(*lease_us))
            }
        }
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
