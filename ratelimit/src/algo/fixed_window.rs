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

/// Decides one call; also whether it wrote `state`.
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
    let stored = |i: usize| state.as_ref().and_then(|w| w.slots.get(i).copied().flatten());
    // Judged at the latest start if now is earlier: no call goes back before
    // a recorded one. Inside live windows, any time from there on finds the
    // same windows, so a write that starts none needs no time recorded.
    let now = (0..strategies.len()).filter_map(|i| stored(i).map(|(start, _)| start)).fold(now, u64::max);
    let mut slots: Vec<Option<(u64, u64)>> =
        (0..strategies.len()).map(|i| stored(i).filter(|&(start, _)| now - start < strategies[i].window_us)).collect();
    if kind == CallKind::Refund {
        return refund(strategies, state, slots.as_mut_slice(), now, cost);
    }
    let counts: Vec<u64> = slots.iter().map(|s| s.map_or(0, |(_, c)| c)).collect();
    let verdict = judge(strategies, &counts, cost);

    // The windows as they stand after this call (as if taken, for a peek).
    let after: Vec<Option<(u64, u64)>> = slots
        .iter()
        .map(|slot| match (*slot, verdict.allowed && cost > 0) {
            (Some((start, count)), true) => Some((start, count + cost)),
            (None, true) => Some((now, cost)),
            (slot, false) => slot,
        })
        .collect();
    let counts_after: Vec<u64> = after.iter().map(|s| s.map_or(0, |(_, c)| c)).collect();
    let (limit, remaining) = least_room(strategies, &counts_after);
    let ends = |slots: &[Option<(u64, u64)>], mask: u32| {
        slots
            .iter()
            .zip(strategies)
            .enumerate()
            .filter(|(i, _)| mask >> i & 1 == 1)
            .filter_map(|(_, (slot, s))| slot.map(|(start, _)| (start + s.window_us).saturating_sub(now)))
            .max()
            .unwrap_or(0)
    };
    let reset_after_us = ends(&after, u32::MAX);
    // A violated strategy lets the call pass when its window ends.
    let (retry_after_us, retries) = retry_times(strategies, &verdict, |i, _| ends(&slots, 1 << i));

    // Per strategy, only when there are several (the single rule is above).
    let quotas = match strategies.len() {
        1 => Vec::new(),
        _ => strategies
            .iter()
            .zip(&after)
            .enumerate()
            .map(|(i, (s, slot))| {
                let (remaining, reset_after_us) = match *slot {
                    Some((start, count)) => (s.limit.saturating_sub(count), (start + s.window_us).saturating_sub(now)),
                    None => (s.limit, 0),
                };
                QuotaOutcome { remaining, reset_after_us, retry_after_us: retries.get(i).copied().flatten() }
            })
            .collect(),
    };

    let write = verdict.allowed && cost > 0 && kind == CallKind::Check;
    if write {
        *state = Some(Windows { slots: after });
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
