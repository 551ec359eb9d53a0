//! When a fixed window is decided by a counter whose TTL is the window
//! (`lua/fixed_window_counter.lua`), the form the usual INCR + PEXPIRE
//! limiters take: one command besides the `PTTL` that dates the window and
//! the `TIME` that dates the reply, and two numbers back, packed as the
//! buckets' are (a batch's joined into one string). It is used when
//! three things hold, and
//! `lua/fixed_window.lua` decides every other fixed window:
//! - the decision is on Redis's own clock: the key's TTL runs on it, so a
//!   client or manual clock could not drive it;
//! - the policy has one strategy;
//! - the state and the reply fit a Lua number: the counter holds `window
//!   in ms × 2^21 + count`, so the limit is below 2^20 (a count and a cost
//!   each at most the limit stay below 2^21) and the window below 2^32 ms;
//!   the reply `(limit + 1) × (window in ms + 2)` is then below 2^53.
//!
//! Redis drops a key once its millisecond clock is past the expiry, so such
//! a window lasts from W to W + 1 ms after its first hit, never less.
//! `reset_after` is the key's PTTL, the time left as Redis counts it (W on
//! a window's first hit, as for an exact window); `retry_after` is PTTL +
//! 1 ms, rounded up so that obeying it succeeds. Its state is a plain
//! counter under the same key as the hash of starts and counts
//! (`key::layout`): each script reads the other's form as the first
//! strategy's window, so the memory store and Redis keep one state for a
//! policy whatever strategies it gains or loses. The window a counter was
//! written under gives its start (its end less that window), so a policy
//! of another window judges it from that start by its own window, as the
//! memory store does: a window that grows runs to its start plus the
//! longer window, never to the shorter one's TTL.

use crate::policy::{Params, Policy, Strategy};

/// Limits below this keep a count and a cost below 2^21, the counter's
/// unit of window (`lua/fixed_window_counter.lua`).
const LIMIT_BELOW: u64 = 1 << 20;
/// Windows (ms) below this keep the counter below 2^53, exact in a double.
const WINDOW_MS_BELOW: u64 = 1 << 32;

/// A policy the counter script can decide: its one strategy, in whole ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    pub(crate) limit: u64,
    pub(crate) window_ms: u64,
}

impl Counter {
    /// The counter form of `policy`, when it has one (see the module docs).
    pub(crate) fn of(policy: &Policy) -> Option<Counter> {
        let Params::FixedWindow { strategies } = &policy.params else { return None };
        let [strategy @ Strategy { calendar: None, .. }] = &strategies[..] else { return None };
        let counter = Counter { limit: strategy.limit, window_ms: strategy.window_us / 1000 };
        let fits = counter.limit < LIMIT_BELOW && (1..WINDOW_MS_BELOW).contains(&counter.window_ms);
        (strategy.window_us % 1000 == 0 && fits).then_some(counter)
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::redis::scripts::counter::Counter;
    use crate::policy::Policy;

    #[test]
    fn only_one_strategy_whose_reply_fits_a_double_is_counted_by_ttl() {
        let counter = |s: &str| Counter::of(&Policy::fixed_window(s).unwrap());
        assert_eq!(counter("10/1s"), Some(Counter { limit: 10, window_ms: 1000 }));
        assert_eq!(counter("10/1s,100/1m"), None);
        assert_eq!(counter("1048575/49d"), Some(Counter { limit: 1_048_575, window_ms: 4_233_600_000 }));
        // A limit of 2^20, or a window of 2^32 ms or more: past the counter's fields.
        assert_eq!(counter("1048576/1s"), None);
        assert_eq!(counter("10/50d"), None);
        assert_eq!(counter("1000000000/1d"), None);
        assert_eq!(Counter::of(&Policy::gcra("1/1s", 0).unwrap()), None);
    }
}
