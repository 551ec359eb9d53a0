//! [`Plan`]: what one policy sends with each call (its numbers, as the
//! scripts read them) and how its reply reads.

use super::counter::Counter;
use super::family::Family;
use super::reply::Reply;
use crate::policy::{Params, Policy, Strategy};
use redlimit_grammar::AlgorithmKind;

/// How one policy is decided on Redis: its family's script, the policy's
/// numbers as the script reads them (ARGV 1, `lua/README.md`), and how to
/// read the reply. Made once per bound policy, by a few small writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) family: Family,
    pub(crate) policy: Vec<u8>,
    pub(crate) reply: Reply,
}

/// The plan for `policy`; `server_clock`: decided on Redis's own clock,
/// where a fixed window of one strategy is a counter ([`Counter`]).
pub(crate) fn plan(policy: &Policy, server_clock: bool) -> Plan {
    if let Some(counter) = Counter::of(policy).filter(|_| server_clock) {
        let numbers = [number(counter.limit), number(counter.window_ms)].concat();
        return Plan { family: Family::Counter, policy: numbers, reply: Reply::Counter(counter) };
    }
    let window = |family, precision_us, strategies: &[Strategy]| Plan {
        family,
        policy: windows(precision_us, strategies),
        reply: Reply::Window { quotas: if strategies.len() > 1 { strategies.len() } else { 0 } },
    };
    let (n, p) = policy.reduced_rate;
    // The buckets also send their refill step (lua/policy_bucket.lua); gcra has none.
    let step = policy.refill_step();
    let bucket = |family, kind, first: u64| Plan {
        family,
        policy: match kind {
            AlgorithmKind::Gcra => [first, n, p].iter().flat_map(|&v| number(v)).collect(),
            _ => [first, n, p, step].iter().flat_map(|&v| number(v)).collect(),
        },
        reply: Reply::Bucket { kind, constants: [first, n, p, step] },
    };
    match &policy.params {
        // A calendar policy's numbers name a calendar window: made per window
        // by `CalendarPlans` (`calendar.rs`), this one the current one's.
        Params::FixedWindow { strategies } if strategies.iter().any(|s| s.calendar.is_some()) => Plan {
            policy: calendar_windows(strategies, crate::clock::system_now_us()).0,
            ..window(Family::FixedWindow, 0, strategies)
        },
        Params::FixedWindow { strategies } => window(Family::FixedWindow, 0, strategies),
        Params::SlidingWindow { strategies, precision_us } => window(Family::SlidingWindow, *precision_us, strategies),
        Params::SlidingLog { strategies } => window(Family::SlidingLog, 0, strategies),
        Params::TokenBucket { capacity, .. } => bucket(Family::TokenBucket, AlgorithmKind::TokenBucket, *capacity),
        Params::LeakyBucket { capacity, .. } => bucket(Family::LeakyBucket, AlgorithmKind::LeakyBucket, *capacity),
        Params::Gcra { burst, .. } => bucket(Family::Gcra, AlgorithmKind::Gcra, *burst),
        Params::Concurrency { limit, lease_us } => Plan {
            family: Family::Concurrency,
            policy: [*limit, *lease_us].iter().flat_map(|&v| number(v)).collect(),
            reply: Reply::Window { quotas: 0 },
        },
    }
}

/// A calendar policy's numbers at `now_us` (`lua/policy_windows.lua`): -1,
/// then each strategy's limit, window length and calendar start (-1 for a
/// rolling one, whose length is its own); and the span of times they hold for.
pub(super) fn calendar_windows(strategies: &[Strategy], now_us: u64) -> (Vec<u8>, u64, u64) {
    let mut numbers = Vec::with_capacity(8 + 24 * strategies.len());
    numbers.extend_from_slice(&(-1.0f64).to_le_bytes());
    let (mut from_us, mut until_us) = (0, u64::MAX);
    for s in strategies {
        numbers.extend_from_slice(&number(s.limit));
        // A validated zone places every time a clock gives (`algo::fixed_window`'s rule).
        match s.calendar.and_then(|c| c.window_at(now_us)) {
            Some((start, end)) => {
                numbers.extend_from_slice(&number(end - start));
                numbers.extend_from_slice(&number(start));
                (from_us, until_us) = (from_us.max(start), until_us.min(end));
            }
            None => {
                // Not a calendar strategy, or (never for a validated zone) a time it cannot place: this time only.
                if s.calendar.is_some() {
                    (from_us, until_us) = (now_us, now_us.saturating_add(1));
                }
                numbers.extend_from_slice(&number(s.window_us));
                numbers.extend_from_slice(&(-1.0f64).to_le_bytes());
            }
        }
    }
    (numbers, from_us, until_us)
}

/// One number as the scripts read it: a little-endian double (every
/// policy number below 2^53 is held exactly; larger ones round as Lua's
/// own parsing of them would).
pub(super) fn number(v: u64) -> [u8; 8] {
    (v as f64).to_le_bytes()
}

/// A window policy's numbers: the precision, then each strategy's limit and window.
pub(super) fn windows(precision_us: u64, strategies: &[Strategy]) -> Vec<u8> {
    let mut numbers = Vec::with_capacity(8 + 16 * strategies.len());
    numbers.extend_from_slice(&number(precision_us));
    for strategy in strategies {
        numbers.extend_from_slice(&number(strategy.limit));
        numbers.extend_from_slice(&number(strategy.window_us));
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(numbers: &[u8]) -> Vec<f64> {
        numbers.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn each_family_has_its_reply_and_its_numbers_travel_with_the_call() {
        let gcra = plan(&Policy::gcra("1000/1s", 999).unwrap(), true);
        assert_eq!((gcra.family, read(&gcra.policy)), (Family::Gcra, vec![999.0, 1.0, 1000.0]));
        assert_eq!(gcra.reply, Reply::Bucket { kind: AlgorithmKind::Gcra, constants: [999, 1, 1000, 1] });
        let leaky = plan(&Policy::leaky_bucket(5, "7/3s").unwrap(), false);
        assert_eq!(leaky.reply, Reply::Bucket { kind: AlgorithmKind::LeakyBucket, constants: [5, 7, 3_000_000, 1] });
        assert_eq!(read(&leaky.policy), [5.0, 7.0, 3e6, 1.0], "refilled continuously: a step of 1 µs");
        let interval = plan(&Policy::token_bucket_interval(10, "10/1m").unwrap(), true);
        assert_eq!(read(&interval.policy), [10.0, 1.0, 6e6, 6e7], "10 tokens a minute, all at its end");

        let one = Policy::fixed_window("10/1s").unwrap();
        let counter = plan(&one, true);
        assert_eq!(
            (counter.family, counter.reply),
            (Family::Counter, Reply::Counter(Counter { limit: 10, window_ms: 1000 }))
        );
        assert_eq!(read(&counter.policy), [10.0, 1000.0], "the limit and the window in ms");
        assert_eq!(plan(&one, false).reply, Reply::Window { quotas: 0 }, "a client clock: the hash layout");
        let two = plan(&Policy::fixed_window("10/1s,100/1m").unwrap(), true);
        assert_eq!(read(&two.policy), [0.0, 10.0, 1e6, 100.0, 6e7]);
        assert_eq!(two.reply, Reply::Window { quotas: 2 });
    }

    #[test]
    fn a_sliding_window_sends_its_precision_then_its_strategies() {
        let few = plan(&Policy::sliding_window("12/1500ms", "100ms").unwrap(), true);
        let many = plan(&Policy::sliding_window("12/1m,5/1s", "100ms").unwrap(), true);
        assert_eq!((few.family, many.family), (Family::SlidingWindow, Family::SlidingWindow), "one layout");
        assert_eq!(read(&few.policy), [100_000.0, 12.0, 1_500_000.0]);
    }
}
