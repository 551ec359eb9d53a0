//! Twin of `lua/sliding_log.lua`: an exact log of admitted hits, one entry per permit.

use super::{judge, least_room};
use crate::backend::Outcome;
use crate::Strategy;
use std::collections::VecDeque;

/// Admitted hits' times in ascending order (as the sorted set keeps them).
#[derive(Debug, Clone)]
pub(crate) struct Log {
    hits: VecDeque<u64>,
}

// Kept out of line: a window's code would otherwise weigh on the integer
// algorithms decided beside it (`algo::decide` inlines those).
#[inline(never)]
pub(crate) fn decide(strategies: &[Strategy], state: &mut Option<Log>, now: u64, cost: u64, peek: bool) -> Outcome {
    let widest = strategies.iter().map(|s| s.window_us).max().unwrap_or(0);
    let empty = VecDeque::new();
    let hits = state.as_ref().map_or(&empty, |log| &log.hits);
    // Half-open windows: a hit at s counts while now - s < W. Hits are sorted,
    // so the hits of a window are a suffix of the log.
    let first_in = |w: u64| hits.partition_point(|&s| s + w <= now);
    let counts: Vec<u64> = strategies.iter().map(|s| (hits.len() - first_in(s.window_us)) as u64).collect();
    let verdict = judge(strategies, &counts, cost);
    let taken = if verdict.allowed { cost } else { 0 };
    let counts_after: Vec<u64> = counts.iter().map(|c| c + taken).collect();
    let (limit, remaining) = least_room(strategies, &counts_after);

    let newest = hits.back().copied().filter(|&s| s + widest > now);
    let newest = if taken > 0 { Some(newest.map_or(now, |s| s.max(now))) } else { newest };
    let reset_after_us = newest.map_or(0, |s| (s + widest).saturating_sub(now));
    let retry_after_us = (!verdict.allowed && !verdict.never).then(|| {
        strategies
            .iter()
            .zip(&counts)
            .enumerate()
            .filter(|(i, _)| verdict.violated >> i & 1 == 1)
            .map(|(_, (s, &c))| {
                // The (c + cost - limit)-th oldest hit of this window must leave.
                let index = (hits.len() as u64 - c) + (c + cost - s.limit) - 1;
                (hits[index as usize] + s.window_us).saturating_sub(now)
            })
            .max()
            .unwrap_or(0)
    });

    // Per strategy, only when there are several: the newest hit leaves it last.
    let quotas = match strategies.len() {
        1 => Vec::new(),
        _ => strategies
            .iter()
            .zip(&counts_after)
            .map(|(s, &c)| (s.limit.saturating_sub(c), newest.map_or(0, |n| (n + s.window_us).saturating_sub(now))))
            .collect(),
    };

    if taken > 0 && !peek {
        // Only a write changes the state: drop what no window counts any
        // more, then add one entry per permit, keeping the order.
        let mut log = state.take().unwrap_or(Log { hits: VecDeque::new() });
        let expired = log.hits.partition_point(|&s| s + widest <= now);
        log.hits.drain(..expired);
        let at = log.hits.partition_point(|&s| s <= now);
        let later = log.hits.split_off(at);
        log.hits.extend(std::iter::repeat_n(now, taken as usize));
        log.hits.extend(later);
        *state = Some(log);
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
