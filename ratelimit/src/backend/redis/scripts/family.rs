//! [`Family`]: the scripts, one per family of algorithm, each made of its
//! fragments (`fragments.rs`) whatever the policy.

use super::fragments::{
    join, BUCKET_READ, BUCKET_STATE, CLOCK, CONCURRENCY, FIXED_WINDOW, FIXED_WINDOW_COUNTER, GCRA, LEAKY_BUCKET,
    POLICY_BUCKET, POLICY_CONCURRENCY, POLICY_COUNTER, POLICY_GCRA, POLICY_SLIDING_WINDOW, POLICY_WINDOWS, SET_STATE,
    SLIDING_LOG, SLIDING_WINDOW, TOKEN_BUCKET, WINDOW,
};

/// A script: every policy of one family is decided by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    FixedWindow,
    /// A fixed window of one strategy on Redis's clock ([`Counter`](super::counter::Counter)).
    Counter,
    SlidingWindow,
    SlidingLog,
    TokenBucket,
    LeakyBucket,
    Gcra,
    Concurrency,
}

/// How many families, so scripts.
pub(crate) const FAMILIES: usize = 8;

impl Family {
    #[cfg(test)]
    const ALL: [Family; FAMILIES] = [
        Family::FixedWindow,
        Family::Counter,
        Family::SlidingWindow,
        Family::SlidingLog,
        Family::TokenBucket,
        Family::LeakyBucket,
        Family::Gcra,
        Family::Concurrency,
    ];

    /// Its place in `Family::ALL`: lanes and the registry are indexed by it.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The family's script; `cross_slot`: flagged for a cluster node's
    /// slots ([`CROSS_SLOT`](super::fragments::CROSS_SLOT)).
    pub(super) fn source(self, cross_slot: bool) -> String {
        let fragments: &[&str] = match self {
            Family::FixedWindow => &[POLICY_WINDOWS, CLOCK, WINDOW, FIXED_WINDOW],
            Family::Counter => &[POLICY_COUNTER, FIXED_WINDOW_COUNTER],
            Family::SlidingWindow => &[POLICY_SLIDING_WINDOW, CLOCK, WINDOW, SLIDING_WINDOW],
            Family::SlidingLog => &[POLICY_WINDOWS, CLOCK, WINDOW, SLIDING_LOG],
            Family::TokenBucket => &[POLICY_BUCKET, CLOCK, BUCKET_READ, TOKEN_BUCKET, BUCKET_STATE, SET_STATE],
            Family::LeakyBucket => &[POLICY_BUCKET, CLOCK, BUCKET_READ, LEAKY_BUCKET, BUCKET_STATE, SET_STATE],
            Family::Gcra => &[POLICY_GCRA, CLOCK, GCRA, SET_STATE],
            Family::Concurrency => &[POLICY_CONCURRENCY, CLOCK, CONCURRENCY],
        };
        join(fragments, cross_slot)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fragments::{CROSS_SLOT, HEAD, PRELUDE};
    use super::*;

    #[test]
    fn only_the_counter_decides_without_clock_lua() {
        for family in Family::ALL {
            assert_eq!(family.source(false).contains(CLOCK), family != Family::Counter);
            assert!(family.source(false).contains(PRELUDE));
        }
    }

    #[test]
    fn only_a_cross_slot_script_is_flagged_and_says_so() {
        let (plain, flagged) = (Family::Gcra.source(false), Family::Gcra.source(true));
        assert!(plain.starts_with("local cross_slot = false\n"));
        assert!(flagged.starts_with(CROSS_SLOT) && flagged.contains("\nlocal cross_slot = true\n"));
        assert!(HEAD.contains("local function redis_time()"));
    }
}
