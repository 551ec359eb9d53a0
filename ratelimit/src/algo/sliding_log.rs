//! Twin of `lua/sliding_log.lua`: an exact log of admitted hits, one entry per permit.

use super::{judge, least_room};
use crate::backend::Outcome;
use crate::Strategy;
use std::collections::VecDeque;

/// Admitted hits' times, oldest first, within the largest window.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    hits: VecDeque<u64>,
}

pub(crate) fn decide(strategies: &[Strategy], state: &mut Option<Log>, now: u64, cost: u64, peek: bool) -> Outcome {
    let widest = strategies.iter().map(|s| s.window_us).max().unwrap_or(0);
    let mut log = state.take().unwrap_or(Log { hits: VecDeque::new() });
    // Half-open windows: a hit at s counts while now - s < W.
    while log.hits.front().is_some_and(|&s| s + widest <= now) {
        log.hits.pop_front();
    }
    let in_window = |w: u64| log.hits.iter().filter(|&&s| s + w > now).count() as u64;
    let counts: Vec<u64> = strategies.iter().map(|s| in_window(s.window_us)).collect();
    let verdict = judge(strategies, &counts, cost);
    let taken = if verdict.allowed { cost } else { 0 };
    let counts_after: Vec<u64> = counts.iter().map(|c| c + taken).collect();
    let (limit, remaining) = least_room(strategies, &counts_after);

    let newest = if taken > 0 { Some(now) } else { log.hits.iter().copied().max() };
    let reset_after_us = newest.map_or(0, |s| (s + widest).saturating_sub(now));
    let retry_after_us = (!verdict.allowed && !verdict.never).then(|| {
        let total = log.hits.len() as u64;
        strategies
            .iter()
            .zip(&counts)
            .enumerate()
            .filter(|(i, _)| verdict.violated >> i & 1 == 1)
            .map(|(_, (s, &c))| {
                // The (c + cost - limit)-th oldest hit of this window must leave.
                let index = (total - c) + (c + cost - s.limit) - 1;
                (log.hits[index as usize] + s.window_us).saturating_sub(now)
            })
            .max()
            .unwrap_or(0)
    });

    if taken > 0 && !peek {
        // Kept sorted by time, as the sorted set is, even if the clock stepped back.
        let at = log.hits.partition_point(|&s| s <= now);
        for _ in 0..taken {
            log.hits.insert(at, now);
        }
    }
    if !log.hits.is_empty() {
        *state = Some(log);
    }
    Outcome { allowed: verdict.allowed, limit, remaining, reset_after_us, retry_after_us, violated: if verdict.allowed { 0 } else { verdict.violated } }
}
