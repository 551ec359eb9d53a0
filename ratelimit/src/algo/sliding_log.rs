//! Twin of `lua/sliding_log.lua`: an exact log of admitted calls, one entry
//! per call (not per permit) with its weight and the weight of every entry
//! before it, so a call's work never depends on its cost.

use super::{judge, least_room, retry_times};
use crate::backend::{Outcome, QuotaOutcome};
use crate::policy::Strategy;
use std::collections::VecDeque;

/// The most entries one key's log holds. A call admitted when the log is
/// full joins the newest entry, which takes the call's time: that weight
/// then counts until the later call leaves, so a full log errs toward
/// denying, never admitting more than the policy allows.
pub(crate) const MAX_ENTRIES: usize = 1000;

/// When the oldest entry's running total reaches this, every entry's is
/// lowered by it, keeping totals far below 2^53 (exact in Lua's doubles).
const REBASE_FROM: u64 = 1 << 48;

/// One admitted call, or several admitted at the same µs (or into a full log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Logged {
    /// When it was admitted, µs.
    at: u64,
    /// The weight of every entry before it since the log started.
    before: u64,
    /// Its permits.
    weight: u64,
}

impl Logged {
    fn through(&self) -> u64 {
        self.before + self.weight
    }
}

/// Admitted calls in time order: times strictly increase, and so do the
/// running totals.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    entries: VecDeque<Logged>,
}

impl Log {
    /// Entries held (never more than [`MAX_ENTRIES`]).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

// Kept out of line: a window's code would otherwise weigh on the integer
// algorithms decided beside it (`algo::decide` inlines those).
#[inline(never)]
pub(crate) fn decide(strategies: &[Strategy], state: &mut Option<Log>, now: u64, cost: u64, peek: bool) -> Outcome {
    let widest = strategies.iter().map(|s| s.window_us).max().unwrap_or(0);
    let empty = VecDeque::new();
    let entries = state.as_ref().map_or(&empty, |log| &log.entries);
    let newest = entries.back().copied();
    // Judged at the newest entry's time if now is earlier: no call goes back
    // before a recorded one, so no late call counts a window already trimmed.
    let now = newest.map_or(now, |e| e.at.max(now));
    let total = newest.map_or(0, |e| e.through());
    // Half-open windows: an entry at s counts for W while now - s < W. The
    // entries a window counts are a suffix of the log.
    let first_in = |w: u64| entries.partition_point(|e| e.at + w <= now);
    let count = |s: &Strategy| entries.get(first_in(s.window_us)).map_or(0, |e| total - e.before);
    let verdict = judge(strategies, strategies.iter().map(count), cost);
    let taken = if verdict.allowed { cost } else { 0 };
    let (limit, remaining) = least_room(strategies, strategies.iter().map(|s| count(s) + taken));

    let newest_at = newest.map(|e| e.at).filter(|&at| at + widest > now);
    let newest_at = if taken > 0 { Some(now) } else { newest_at };
    let reset_after_us = newest_at.map_or(0, |at| (at + widest).saturating_sub(now));
    let (retry_after_us, retries) = retry_times(strategies, &verdict, |_, s| {
        // The weight up to the running total `total + cost - limit`
        // must leave: the entry holding it leaves at its time + W.
        let must_leave = total + cost - s.limit;
        let holding = entries.partition_point(|e| e.through() < must_leave);
        (entries[holding].at + s.window_us).saturating_sub(now)
    });

    // Per strategy, only when there are several: the newest entry leaves it last.
    let quotas = match strategies.len() {
        1 => Vec::new(),
        _ => strategies
            .iter()
            .enumerate()
            .map(|(i, s)| QuotaOutcome {
                remaining: s.limit.saturating_sub(count(s) + taken),
                reset_after_us: newest_at.map_or(0, |at| (at + s.window_us).saturating_sub(now)),
                retry_after_us: retries.get(i).copied().flatten(),
            })
            .collect(),
    };

    if taken > 0 && !peek {
        write(state.get_or_insert_with(|| Log { entries: VecDeque::new() }), widest, now, taken);
    }
    verdict.outcome((limit, remaining), (reset_after_us, retry_after_us), now, quotas)
}

/// Records `taken` permits admitted at `now` (no earlier than any entry):
/// drops what no window counts any more, then adds an entry, or joins the
/// newest when it has this very time or the log is full.
fn write(log: &mut Log, widest: u64, now: u64, taken: u64) {
    let dead = log.entries.partition_point(|e| e.at + widest <= now);
    log.entries.drain(..dead);
    let full = log.entries.len() >= MAX_ENTRIES;
    match log.entries.back_mut() {
        Some(newest) if newest.at == now || full => {
            newest.at = now;
            newest.weight += taken;
        }
        newest => {
            let before = newest.map_or(0, |e| e.through());
            log.entries.push_back(Logged { at: now, before, weight: taken });
        }
    }
    // The oldest entry's total is at most the newest's: checked only then.
    let written = log.entries.back().map_or(0, |e| e.before);
    let base = if written >= REBASE_FROM { log.entries.front().map_or(0, |e| e.before) } else { 0 };
    if base >= REBASE_FROM {
        for e in &mut log.entries {
            e.before -= base;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategies(spec: &str) -> Vec<Strategy> {
        crate::Policy::sliding_log(spec).unwrap().strategies().to_vec()
    }

    #[test]
    fn a_call_of_any_cost_is_one_entry() {
        let one = strategies("1000000/1m");
        let mut log = None;
        let big = decide(&one, &mut log, 1_000, 1_000_000, false);
        assert!(big.allowed && big.remaining == 0);
        assert_eq!(log.as_ref().unwrap().len(), 1);
        let denied = decide(&one, &mut log, 2_000, 1, false);
        assert_eq!(denied.retry_after_us, Some(60_000_000 - 1_000));
    }

    #[test]
    fn calls_at_one_time_share_an_entry_and_a_full_log_joins_the_newest() {
        let s = strategies("5000/10s");
        let mut log = None;
        for t in 0..MAX_ENTRIES as u64 + 10 {
            assert!(decide(&s, &mut log, 1_000 + t, 1, false).allowed);
            assert!(decide(&s, &mut log, 1_000 + t, 2, false).allowed, "the same µs");
        }
        let held = log.as_ref().unwrap();
        assert_eq!(held.len(), MAX_ENTRIES);
        let newest = *held.entries.back().unwrap();
        assert_eq!((newest.at, newest.weight), (1_000 + MAX_ENTRIES as u64 + 9, 33), "the last 11 µs joined");
        // Every permit is still counted.
        assert_eq!(decide(&s, &mut log, 1_000 + 20_000, 0, true).remaining, 5000 - 3 * (MAX_ENTRIES as u64 + 10));
    }

    #[test]
    fn retry_names_when_enough_weight_has_left() {
        let s = strategies("10/1s");
        let mut log = None;
        for (t, cost) in [(0, 3), (100, 4), (200, 2)] {
            assert!(decide(&s, &mut log, 1_000_000 + t, cost, false).allowed);
        }
        // 9 held; a cost of 5 needs 4 to leave: the first two entries (3 + 4).
        let denied = decide(&s, &mut log, 1_000_500, 5, false);
        assert_eq!(denied.retry_after_us, Some(1_000_000 + 100 + 1_000_000 - 1_000_500));
        // A cost of 4 needs 3 to leave: the first entry.
        assert_eq!(decide(&s, &mut log, 1_000_500, 4, false).retry_after_us, Some(999_500));
    }

    #[test]
    fn running_totals_are_lowered_before_they_grow_large() {
        let s = strategies("10/1s");
        let start = |before| Logged { at: 1_000_000, before, weight: 3 };
        let mut log = Some(Log { entries: VecDeque::from([start(REBASE_FROM + 5)]) });
        let d = decide(&s, &mut log, 1_500_000, 4, false);
        assert!(d.allowed && d.remaining == 3);
        let entries: Vec<(u64, u64)> = log.as_ref().unwrap().entries.iter().map(|e| (e.before, e.weight)).collect();
        assert_eq!(entries, [(0, 3), (3, 4)], "lowered by the oldest's total");
        let denied = decide(&s, &mut log, 1_600_000, 4, false);
        assert_eq!(denied.retry_after_us, Some(400_000), "the same answers after");
        // Below the mark, nothing moves.
        let mut log = Some(Log { entries: VecDeque::from([start(REBASE_FROM - 5)]) });
        decide(&s, &mut log, 1_500_000, 4, false);
        assert_eq!(log.unwrap().entries[0].before, REBASE_FROM - 5);
    }
}
