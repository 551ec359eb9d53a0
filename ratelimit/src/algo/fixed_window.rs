//! Twin of `lua/fixed_window.lua`: per strategy, a window started by the first
//! admitted hit after the previous one ended.

use super::{judge, least_room, retry_times};
use crate::backend::{CallKind, Outcome, QuotaOutcome};
use crate::Strategy;

/// Per strategy (declared order): the current window's start and count.
#[derive(Debug, Clone)]
pub(crate) struct Windows {
    slots: Vec<Option<(u64, u64)>>,
}

/// Decides one call; also whether it wrote `state`. Allocates only for a
/// new key's windows and for the per-strategy figures a policy of several
/// strategies or a denial reports: a call on a known key updates its windows in place.
// Kept out of line: a window's code would otherwise weigh on the integer
// algorithms decided beside it (`algo::decide` inlines those).
#[inline(never)]
pub(crate) fn decide(
    strategies: &[Strategy],
    state: &mut Option<Windows>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let stored: &[Option<(u64, u64)>] = state.as_ref().map_or(&[], |w| &w.slots);
    // Judged at the latest start if now is earlier: no call goes back before
    // a recorded one. Inside live windows, any time from there on finds the
    // same windows, so a write that starts none needs no time recorded.
    let now = stored.iter().take(strategies.len()).flatten().map(|&(start, _)| start).fold(now, u64::max);
    let current = |i: usize| live(stored.get(i).copied().flatten(), &strategies[i], now);
    if matches!(kind, CallKind::Refund(_)) {
        let mut slots: Vec<Option<(u64, u64)>> = (0..strategies.len()).map(current).collect();
        return refund(strategies, state, &mut slots, now, cost);
    }
    let verdict = judge(strategies, (0..strategies.len()).map(|i| count(current(i))), cost);
    let take = verdict.allowed && cost > 0;
    // The windows as they stand after this call (as if taken, for a peek).
    let after = |i: usize| taken(current(i), take, now, cost);
    let (limit, remaining) = least_room(strategies, (0..strategies.len()).map(|i| count(after(i))));
    let ends = |slot: &dyn Fn(usize) -> Option<(u64, u64)>, mask: u32| {
        (0..strategies.len())
            .filter(|i| mask >> i & 1 == 1)
            .filter_map(|i| slot(i).map(|(start, _)| (start + strategies[i].window_us).saturating_sub(now)))
            .max()
            .unwrap_or(0)
    };
    let reset_after_us = ends(&after, u32::MAX);
    // A violated strategy lets the call pass when its window ends.
    let (retry_after_us, retries) = retry_times(strategies, &verdict, |i, _| ends(&current, 1 << i));

    // Per strategy, only when there are several (the single rule is above).
    let quotas = match strategies.len() {
        1 => Vec::new(),
        _ => strategies
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (remaining, reset_after_us) = match after(i) {
                    Some((start, count)) => (s.limit.saturating_sub(count), (start + s.window_us).saturating_sub(now)),
                    None => (s.limit, 0),
                };
                QuotaOutcome { remaining, reset_after_us, retry_after_us: retries.get(i).copied().flatten() }
            })
            .collect(),
    };

    let write = take && kind == CallKind::Check;
    if write {
        let known = state.as_ref().is_some_and(|w| w.slots.len() == strategies.len());
        if known {
            // Each window follows from its own stored value: written in place.
            for (slot, s) in state.iter_mut().flat_map(|w| w.slots.iter_mut()).zip(strategies) {
                *slot = taken(live(*slot, s, now), take, now, cost);
            }
        } else {
            // A new key, or one stored under another number of strategies.
            let slots = (0..strategies.len()).map(after).collect();
            *state = Some(Windows { slots });
        }
    }
    let outcome = Outcome {
        allowed: verdict.allowed,
        limit,
        remaining,
        reset_after_us,
        retry_after_us,
        violated: if verdict.allowed { 0 } else { verdict.violated },
        now_us: now,
        quotas,
    };
    (outcome, write)
}

/// A stored window, if it still runs at `now`.
fn live(slot: Option<(u64, u64)>, strategy: &Strategy, now: u64) -> Option<(u64, u64)> {
    slot.filter(|&(start, _)| now - start < strategy.window_us)
}

/// A live window after a call that took `cost` (`take`) or nothing.
fn taken(slot: Option<(u64, u64)>, take: bool, now: u64, cost: u64) -> Option<(u64, u64)> {
    match (slot, take) {
        (Some((start, count)), true) => Some((start, count + cost)),
        (None, true) => Some((now, cost)),
        (slot, false) => slot,
    }
}

/// Permits a window holds.
fn count(slot: Option<(u64, u64)>) -> u64 {
    slot.map_or(0, |(_, c)| c)
}

/// Gives `cost` back to every window still running at `now` (`live`),
/// never below zero, then reports as a check of cost 0 would. A window
/// that ended has nothing to give back: its permits no longer count.
#[cold]
fn refund(
    strategies: &[Strategy],
    state: &mut Option<Windows>,
    live: &mut [Option<(u64, u64)>],
    now: u64,
    cost: u64,
) -> (Outcome, bool) {
    let mut write = false;
    for (i, slot) in live.iter_mut().enumerate() {
        if let Some((start, count)) = slot {
            if cost > 0 && *count > 0 {
                *count = count.saturating_sub(cost);
                write = true;
                // The lowered count, beside the other windows as stored
                // (an ended one's start still bounds how late a call is judged).
                if let Some(stored) = state.as_mut().and_then(|w| w.slots.get_mut(i)) {
                    *stored = Some((*start, *count));
                }
            }
        }
    }
    let (outcome, _) = decide(strategies, &mut Some(Windows { slots: live.to_vec() }), now, 0, CallKind::Peek);
    (outcome, write)
}
