//! Twin of `lua/sliding_window.lua`: counts in sub-windows of `precision`,
//! aligned to multiples of it; a strategy of window W sums the W/P most recent
//! sub-windows, the current one included. Sub-windows counted at another
//! precision are first moved to the sub-window holding their last
//! microsecond (`lua/sliding_window.lua`, `convert`).

use super::{judge, least_room, retry_times};
use crate::backend::{Outcome, QuotaOutcome};
use crate::policy::Strategy;
use std::collections::VecDeque;

/// Sub-window index (`start / precision`) and its count, oldest first: a
/// write is never before the newest (see `now` below), so it joins the
/// back, and dead sub-windows leave from the front. `precision` is the one
/// they were counted at.
#[derive(Debug, Clone)]
pub(crate) struct SubWindows {
    precision: u64,
    counts: VecDeque<(u64, u64)>,
}

/// Sub-windows counted at `was` as sub-windows of `precision`: each count
/// moves to the sub-window holding its old one's last microsecond, so no
/// permit counts for less time than it would have at `precision`; counts
/// landing together are merged. The order stays oldest first.
fn convert(counts: &VecDeque<(u64, u64)>, was: u64, precision: u64) -> VecDeque<(u64, u64)> {
    let mut moved: VecDeque<(u64, u64)> = VecDeque::with_capacity(counts.len());
    for &(k, n) in counts {
        let k = (k.saturating_add(1).saturating_mul(was) - 1) / precision;
        match moved.back_mut() {
            Some((last, total)) if *last == k => *total += n,
            _ => moved.push_back((k, n)),
        }
    }
    moved
}

// Kept out of line: a window's code would otherwise weigh on the integer
// algorithms decided beside it (`algo::decide` inlines those).
#[inline(never)]
pub(crate) fn decide(
    strategies: &[Strategy],
    precision: u64,
    state: &mut Option<SubWindows>,
    now: u64,
    cost: u64,
    peek: bool,
) -> Outcome {
    let empty = VecDeque::new();
    // Counted at another precision: decided on the converted counts, which
    // only a write keeps.
    let converted = match state {
        Some(subs) if subs.precision != precision => Some(convert(&subs.counts, subs.precision, precision)),
        _ => None,
    };
    let stored = match (&converted, state.as_ref()) {
        (Some(moved), _) => moved,
        (None, Some(subs)) => &subs.counts,
        (None, None) => &empty,
    };
    // A write records its time as its sub-window: judged at the start of the
    // newest one written when now is earlier, no call goes back before a
    // recorded one (within a sub-window, any time finds the same counts).
    let now = match stored.back() {
        Some(&(newest, _)) if newest > now / precision => newest * precision,
        _ => now,
    };
    let current = now / precision;
    let span = |s: &Strategy| s.window_us / precision;
    let widest = strategies.iter().map(span).max().unwrap_or(1);
    // Sub-windows at or before `current - widest` never count again.
    let live_from = (current + 1).saturating_sub(widest);
    // Strategy s counts the sub-windows k with k + span > current.
    let counted = |s: &Strategy| {
        let from = (current + 1).saturating_sub(span(s));
        stored.range(stored.partition_point(|&(k, _)| k < from)..)
    };
    let count = |s: &Strategy| counted(s).map(|(_, c)| c).sum::<u64>();
    let verdict = judge(strategies, strategies.iter().map(count), cost);
    let taken = if verdict.allowed { cost } else { 0 };
    let (limit, remaining) = least_room(strategies, strategies.iter().map(|s| count(s) + taken));

    let newest = stored.back().map(|&(k, _)| k).filter(|&k| k >= live_from);
    let newest = if taken > 0 { Some(newest.map_or(current, |k| k.max(current))) } else { newest };
    let reset_after_us = newest.map_or(0, |k| ((k + widest) * precision).saturating_sub(now));
    let (retry_after_us, retries) = retry_times(strategies, &verdict, |_, s| {
        // Drop sub-windows oldest first until the cost fits.
        let mut left = count(s);
        let mut passes_at = (current + 1) * precision;
        for &(k, n) in counted(s) {
            left -= n;
            passes_at = (k + span(s)) * precision;
            if left + cost <= s.limit {
                break;
            }
        }
        passes_at.saturating_sub(now)
    });

    // Per strategy, only when there are several: its newest counted
    // sub-window leaves it at (newest + span) * precision.
    let quotas = match strategies.len() {
        1 => Vec::new(),
        _ => strategies
            .iter()
            .enumerate()
            .map(|(i, s)| QuotaOutcome {
                remaining: s.limit.saturating_sub(count(s) + taken),
                reset_after_us: newest.map_or(0, |k| ((k + span(s)) * precision).saturating_sub(now)),
                retry_after_us: retries.get(i).copied().flatten(),
            })
            .collect(),
    };

    if taken > 0 && !peek {
        // Only a write changes the state: drop dead sub-windows (oldest
        // first, in place), count this one.
        if let Some(moved) = converted {
            *state = Some(SubWindows { precision, counts: moved });
        }
        let counts = &mut state.get_or_insert_with(|| SubWindows { precision, counts: VecDeque::new() }).counts;
        while counts.front().is_some_and(|&(k, _)| k < live_from) {
            counts.pop_front();
        }
        match counts.back_mut() {
            Some((k, n)) if *k == current => *n += taken,
            _ => counts.push_back((current, taken)),
        }
    }
    verdict.outcome((limit, remaining), (reset_after_us, retry_after_us), now, quotas)
}

#[cfg(test)]
mod tests {
    use super::{convert, decide, SubWindows};
    use crate::policy::Strategy;
    use std::collections::VecDeque;

    const S: u64 = 1_000_000;

    #[test]
    fn sub_windows_move_to_the_one_holding_their_last_microsecond() {
        let fine: VecDeque<(u64, u64)> = [(0, 1), (5, 2), (6, 4), (59, 8)].into();
        // 1s -> 6s: 0s..1s and 5s..6s both end in 0s..6s; 59s..60s in 54s..60s.
        assert_eq!(convert(&fine, S, 6 * S), VecDeque::from([(0, 3), (1, 4), (9, 8)]));
        // 6s -> 1s: each counts as taken in its last second.
        assert_eq!(convert(&[(0, 3), (9, 8)].into(), 6 * S, S), VecDeque::from([(5, 3), (59, 8)]));
        assert_eq!(convert(&fine, S, S), fine, "the same precision moves nothing");
    }

    #[test]
    fn a_full_window_at_one_precision_is_full_at_another_and_only_a_write_converts() {
        let strategies = [Strategy::new(3, 60 * S)];
        let mut state = Some(SubWindows { precision: S, counts: [(59, 3)].into() });
        let at = |state: &mut Option<SubWindows>, precision, now_s: u64, peek| {
            decide(&strategies, precision, state, now_s * S, 1, peek)
        };
        // Counted at 1s until 119s; at 6s it is 54s..60s, counted until 114s.
        assert!(!at(&mut state, 6 * S, 113, false).allowed);
        assert!(at(&mut state, 6 * S, 114, true).allowed, "a peek");
        assert_eq!(state.as_ref().map(|s| s.precision), Some(S), "a denial and a peek write nothing");
        assert!(at(&mut state, 6 * S, 114, false).allowed);
        let written = state.as_ref().unwrap();
        assert_eq!((written.precision, written.counts.clone()), (6 * S, VecDeque::from([(19, 1)])));
    }
}
