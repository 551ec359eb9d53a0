//! The fixed window of one strategy as Redis decides it on its own clock: a
//! counter whose TTL is the window (`lua/fixed_window_counter.lua`).
//!
//! This is the form the sources use (INCR + PEXPIRE), and the cheapest a
//! Lua limiter can be: no `TIME`, no ARGV on the common path (each policy
//! has its own script, with its limit and window written in), one command
//! besides the `PTTL` that dates the window, and one integer back. It is used when
//! three things hold, and `lua/fixed_window.lua` decides every other fixed
//! window:
//! - the decision is on the server's clock (no time in the request): the
//!   key's TTL runs on Redis's clock, so a client or manual clock could not
//!   drive it;
//! - the policy has one strategy;
//! - the reply fits a Lua number: `(limit + 1) × (window in ms + 2)` at
//!   most 2^53 (any limit up to about 10^11 per second, 10^8 per day).
//!
//! Redis drops a key once its millisecond clock is past the expiry, so such
//! a window lasts from W to W + 1 ms after its first hit, never less.
//! `reset_after` is the key's PTTL, the time left as Redis counts it (W on
//! a window's first hit, as for an exact window); `retry_after` is PTTL +
//! 1 ms, rounded up so that obeying it succeeds. Its state is a plain counter, a different
//! layout from the hash of start and count, so it lives under its own key
//! (`fixed_window/counter` in the key, see `key::layout`).

use super::Outcome;
use crate::policy::Params;
use crate::policy_scripts::ScriptSlot;
use crate::{Error, Policy};
use ratelimit_grammar::AlgorithmKind;
use redis::Script;

/// The largest integer a Lua number (a double) holds exactly.
const EXACT_IN_DOUBLE: u128 = 1 << 53;

/// A policy the counter script can decide: its one strategy, in whole ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    limit: u64,
    window_ms: u64,
}

impl Counter {
    /// The counter form of `policy`, when it has one (see the module docs).
    pub(crate) fn of(policy: &Policy) -> Option<Counter> {
        let Params::FixedWindow { strategies } = &policy.params else { return None };
        let [strategy] = &strategies[..] else { return None };
        let counter = Counter { limit: strategy.limit, window_ms: strategy.window_us / 1000 };
        let fits = (u128::from(counter.limit) + 1) * (u128::from(counter.window_ms) + 2) <= EXACT_IN_DOUBLE;
        (strategy.window_us % 1000 == 0 && fits).then_some(counter)
    }

    /// The script's full source: the policy's constants, then the file.
    pub(crate) fn source(&self) -> String {
        let (limit, window) = (self.limit, self.window_ms);
        format!(
            "local limit, window, window_text = {limit}, {window}, '{window}'\n{}",
            crate::scripts::FIXED_WINDOW_COUNTER
        )
    }

    /// This policy's script, kept in its `slot`, and whether this call made
    /// it (then Redis has not seen it yet: load it before the first `EVALSHA`).
    pub(crate) fn script<'p>(&self, slot: &'p ScriptSlot) -> (&'p Script, bool) {
        slot.get_or_make((AlgorithmKind::FixedWindow, [self.limit, self.window_ms, 0]), || self.source())
    }

    /// Reads the script's one integer (`count × (W + 2) + t`, negated as
    /// `-1 - v` for a denial); `now_us` dates the decision, as the script
    /// reads no clock.
    pub(crate) fn outcome(&self, reply: i64, cost: u64, now_us: u64) -> Result<Outcome, Error> {
        let allowed = reply >= 0;
        let packed = if allowed { reply } else { -1 - reply } as u64;
        let radix = self.window_ms + 2;
        let (count, t_ms) = (packed / radix, packed % radix);
        if count > self.limit {
            return Err(Error::Protocol(format!(
                "fixed window counter replied {reply}: a count of {count} above the limit {}",
                self.limit
            )));
        }
        // t = PTTL + 1 while a window runs, 0 when none does.
        let reset_after_us = t_ms.saturating_sub(1) * 1000;
        // A denial of a cost the window can hold names when the key is gone
        // for certain: the script only denies such a cost while a window runs.
        let retry_after_us = (!allowed && cost <= self.limit).then_some(t_ms * 1000);
        Ok(Outcome {
            allowed,
            limit: self.limit,
            remaining: self.limit - count,
            reset_after_us,
            retry_after_us,
            violated: u32::from(!allowed),
            now_us,
            quotas: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_strategy_whose_reply_fits_a_double_is_counted_by_ttl() {
        let counter = |s: &str| Counter::of(&Policy::fixed_window(s).unwrap());
        assert_eq!(counter("10/1s"), Some(Counter { limit: 10, window_ms: 1000 }));
        assert_eq!(counter("10/1s,100/1m"), None);
        assert_eq!(counter("100000000/1d"), Some(Counter { limit: 100_000_000, window_ms: 86_400_000 }));
        // (10^9 + 1) × (86 400 000 + 2) is above 2^53.
        assert_eq!(counter("1000000000/1d"), None);
        assert_eq!(Counter::of(&Policy::gcra("1/1s", 0).unwrap()), None);
    }

    #[test]
    fn reads_allowed_denied_and_idle_replies() {
        let counter = Counter { limit: 10, window_ms: 1000 };
        // 3 taken, PTTL 399 ms.
        let allowed = counter.outcome(3 * 1002 + 400, 1, 7).unwrap();
        assert_eq!(
            (allowed.allowed, allowed.remaining, allowed.reset_after_us, allowed.retry_after_us),
            (true, 7, 399_000, None)
        );
        assert_eq!((allowed.violated, allowed.now_us, allowed.limit), (0, 7, 10));
        let denied = counter.outcome(-1 - (10 * 1002 + 250), 1, 7).unwrap();
        assert_eq!(
            (denied.allowed, denied.remaining, denied.retry_after_us, denied.violated),
            (false, 0, Some(250_000), 1)
        );
        assert_eq!(denied.reset_after_us, 249_000, "PTTL, where retry adds the ms Redis may keep the key");
        // A cost above the limit never passes: no retry time.
        let never = counter.outcome(-1 - (2 * 1002 + 250), 11, 7).unwrap();
        assert_eq!((never.allowed, never.remaining, never.retry_after_us), (false, 8, None));
        // Nothing counted and no window: untouched.
        let idle = counter.outcome(0, 0, 7).unwrap();
        assert_eq!((idle.allowed, idle.remaining, idle.reset_after_us), (true, 10, 0));
        assert!(counter.outcome(11 * 1002, 1, 7).is_err(), "a count above the limit is not this script's reply");
    }
}

#[cfg(test)]
mod script_tests {
    use super::*;

    #[test]
    fn each_policy_has_its_own_script() {
        let a = Counter { limit: 7, window_ms: 1500 };
        assert!(a.source().starts_with("local limit, window, window_text = 7, 1500, '1500'\n"));
        let (one, two) = (ScriptSlot::new(), ScriptSlot::new());
        assert_eq!(a.script(&one).0.get_hash(), a.script(&two).0.get_hash());
        assert_ne!(
            Counter { limit: 8, window_ms: 1500 }.script(&ScriptSlot::new()).0.get_hash(),
            a.script(&one).0.get_hash()
        );
    }
}
