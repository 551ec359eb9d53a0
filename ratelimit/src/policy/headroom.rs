//! Priorities: a policy's headroom, and the policy each class of call is
//! decided by: the same algorithm, rates, windows and lease, with each limit
//! scaled to the class's share. Every class decides the same stored key, so
//! a lower class's calls count against a higher class's limit.

use crate::error::Error;
use crate::policy::{Params, Policy};
use redlimit_grammar::{Headroom, Priority};
use std::borrow::Cow;

impl Policy {
    /// The same policy keeping headroom for higher classes of call: a low
    /// call passes only while more than `low_percent` of the limit remains,
    /// a normal one while more than `normal_percent` remains, a critical one
    /// up to the limit. A class's limit is `floor(limit × (100 − percent) / 100)`
    /// of every window's limit, a bucket's capacity, GCRA's `burst + 1` and a
    /// concurrency limit; rates, windows and leases stay. Every class
    /// decides the same state of a key, atomically, so lower classes can
    /// never take what is kept for higher ones. A call's class is chosen
    /// with [`Limiter::with_priority`](crate::Limiter::with_priority).
    ///
    /// Percents are at most 100, low keeps at least as much as normal, and
    /// every class keeps at least one permit of every limit; else
    /// `Err(Error::InvalidPolicy)`.
    ///
    /// ```
    /// use redlimit::{Policy, Priority};
    ///
    /// let policy = Policy::fixed_window("10/1m")?.with_headroom(50, 20)?;
    /// assert_eq!(policy.to_string(), "fixed_window 10/1m headroom low 50% normal 20%");
    /// assert_eq!(policy.for_priority(Priority::Low).max_cost(), 5);
    /// assert_eq!(policy.for_priority(Priority::Normal).max_cost(), 8);
    /// assert_eq!(policy.for_priority(Priority::Critical).max_cost(), 10);
    ///
    /// let error = Policy::gcra("1/1s", 0)?.with_headroom(50, 0).unwrap_err().to_string();
    /// assert!(error.contains("leaves low calls no permit"), "{error}");
    /// # Ok::<(), redlimit::Error>(())
    /// ```
    pub fn with_headroom(self, low_percent: u8, normal_percent: u8) -> Result<Policy, Error> {
        let headroom = Headroom::new(low_percent, normal_percent).map_err(|e| Error::InvalidPolicy(e.to_string()))?;
        self.with_headroom_of(headroom)
    }

    /// The same policy with `headroom`, checked against its limits.
    pub(crate) fn with_headroom_of(mut self, headroom: Headroom) -> Result<Policy, Error> {
        for (what, limit) in limits(&self.params) {
            headroom.check_limit(what, limit).map_err(|e| Error::InvalidPolicy(e.to_string()))?;
        }
        self.headroom = headroom;
        Ok(self)
    }

    /// The share of the limit kept from each class ([`Policy::with_headroom`]).
    pub fn headroom(&self) -> Headroom {
        self.headroom
    }

    /// The policy a call of `class` is decided by: this one with each limit
    /// scaled to the class's share (and no headroom of its own). Its name and
    /// dry run are this policy's.
    pub fn for_priority(&self, class: Priority) -> Policy {
        let headroom = self.headroom;
        let share = |limit: u64| headroom.class_limit(limit, class);
        let params = match &self.params {
            Params::FixedWindow { strategies } => Params::FixedWindow { strategies: scaled(strategies, share) },
            Params::SlidingWindow { strategies, precision_us } => {
                Params::SlidingWindow { strategies: scaled(strategies, share), precision_us: *precision_us }
            }
            Params::SlidingLog { strategies } => Params::SlidingLog { strategies: scaled(strategies, share) },
            Params::TokenBucket { capacity, rate, refill } => {
                Params::TokenBucket { capacity: share(*capacity), rate: *rate, refill: *refill }
            }
            Params::LeakyBucket { capacity, rate } => Params::LeakyBucket { capacity: share(*capacity), rate: *rate },
            // GCRA's limit is `burst + 1`; `with_headroom` left every class at least 1.
            Params::Gcra { rate, burst } => {
                Params::Gcra { rate: *rate, burst: share(burst.saturating_add(1)).saturating_sub(1) }
            }
            Params::Concurrency { limit, lease_us } => {
                Params::Concurrency { limit: share(*limit), lease_us: *lease_us }
            }
        };
        let mut policy = Policy::new(params).with_dry_run(self.is_dry_run());
        if let Some(name) = self.name() {
            policy = policy.with_name(name);
        }
        policy
    }
}

fn scaled(
    strategies: &[crate::policy::Strategy],
    share: impl Fn(u64) -> u64,
) -> Cow<'static, [crate::policy::Strategy]> {
    Cow::Owned(strategies.iter().map(|s| crate::policy::Strategy { limit: share(s.limit), ..*s }).collect())
}

/// Every limit a class's share is taken of, named as the grammar names it.
fn limits(params: &Params) -> Vec<(&'static str, u64)> {
    match params {
        Params::FixedWindow { strategies }
        | Params::SlidingWindow { strategies, .. }
        | Params::SlidingLog { strategies } => strategies.iter().map(|s| ("a limit of", s.limit)).collect(),
        Params::TokenBucket { capacity, .. } | Params::LeakyBucket { capacity, .. } => {
            vec![("a capacity of", *capacity)]
        }
        Params::Gcra { burst, .. } => vec![("a limit (burst + 1) of", burst.saturating_add(1))],
        Params::Concurrency { limit, .. } => vec![("a limit of", *limit)],
    }
}
