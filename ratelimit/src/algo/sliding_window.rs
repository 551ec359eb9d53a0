//! Twin of `lua/sliding_window.lua`: counts in sub-windows of `precision`,
//! aligned to multiples of it; a strategy of window W sums the W/P most recent
//! sub-windows, the current one included.

use super::{judge, least_room, retry_times};
use crate::backend::{Outcome, QuotaOutcome};
use crate::Strategy;
use std::collections::BTreeMap;

/// Sub-window index (`start / precision`) to its count.
#[derive(Debug, Clone)]
pub(crate) struct SubWindows {
    counts: BTreeMap<u64, u64>,
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
    let empty = BTreeMap::new();
    let stored = state.as_ref().map_or(&empty, |subs| &subs.counts);
    // A write records its time as its sub-window: judged at the start of the
    // newest one written when now is earlier, no call goes back before a
    // recorded one (within a sub-window, any time finds the same counts).
    let now = match stored.keys().next_back() {
        Some(&newest) if newest > now / precision => newest * precision,
        _ => now,
    };
    let current = now / precision;
    let span = |s: &Strategy| s.window_us / precision;
    let widest = strategies.iter().map(span).max().unwrap_or(1);
    // Sub-windows at or before `current - widest` never count again.
    let live_from = (current + 1).saturating_sub(widest);
    // Strategy s counts the sub-windows k with k + span > current.
    let counted = |s: &Strategy| stored.range((current + 1).saturating_sub(span(s))..);
    let counts: Vec<u64> = strategies.iter().map(|s| counted(s).map(|(_, c)| c).sum()).collect();
    let verdict = judge(strategies, &counts, cost);
    let taken = if verdict.allowed { cost } else { 0 };
    let counts_after: Vec<u64> = counts.iter().map(|c| c + taken).collect();
    let (limit, remaining) = least_room(strategies, &counts_after);

    let newest = stored.range(live_from..).next_back().map(|(&k, _)| k);
    let newest = if taken > 0 { Some(newest.map_or(current, |k| k.max(current))) } else { newest };
    let reset_after_us = newest.map_or(0, |k| ((k + widest) * precision).saturating_sub(now));
    let (retry_after_us, retries) = retry_times(strategies, &verdict, |i, s| {
        // Drop sub-windows oldest first until the cost fits.
        let mut left = counts[i];
        let mut passes_at = (current + 1) * precision;
        for (&k, &n) in counted(s) {
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
            .zip(&counts_after)
            .enumerate()
            .map(|(i, (s, &c))| QuotaOutcome {
                remaining: s.limit.saturating_sub(c),
                reset_after_us: newest.map_or(0, |k| ((k + span(s)) * precision).saturating_sub(now)),
                retry_after_us: retries.get(i).copied().flatten(),
            })
            .collect(),
    };

    if taken > 0 && !peek {
        // Only a write changes the state: drop dead sub-windows, count this one.
        let mut subs = state.take().unwrap_or(SubWindows { counts: BTreeMap::new() });
        subs.counts = subs.counts.split_off(&live_from);
        *subs.counts.entry(current).or_insert(0) += taken;
        *state = Some(subs);
    }
    Outcome {
        allowed: verdict.allowed,
        limit,
        remaining,
        reset_after_us,
        retry_after_us,
        violated: if verdict.allowed { 0 } else { verdict.violated },
        now_us: now,
        quotas,
    }
}
