//! Twin of `lua/fixed_window.lua`: per strategy, a window started by the first
//! admitted hit after the previous one ended.
//!
//! A key may hold more windows than the policy deciding it has strategies
//! (an earlier policy of the name had more): an admitted call counts in each
//! of those that still runs, by the window it was written with, so a policy
//! that regains the strategy finds every call made since; they never judge.
//! A window is judged from its start by the policy's length; one denied by
//! a longer length than its own runs on by it, and the store keeps the key
//! to that end.

use super::{judge, least_room, retry_times, MOST_OWED};
use crate::backend::{CallKind, Outcome, QuotaOutcome};
use crate::policy::Strategy;

/// Per strategy (declared order): the current window's start and count, and
/// the length it runs by: its last writer's policy's, or a longer one it was
/// denied by (what a window beyond the policy's strategies runs by, and how
/// long the store must keep the key).
#[derive(Debug, Clone)]
pub(crate) struct Windows {
    slots: Vec<Option<Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: u64,
    count: u64,
    window_us: u64,
}

impl Window {
    fn pair(self) -> (u64, u64) {
        (self.start, self.count)
    }
}

/// Decides one call; also whether the store moves the key's expiry to this
/// call's reset: a write, unless a window the key holds ends later, or a
/// denial that lengthened a running window. Allocates only for a
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
    let stored: &[Option<Window>] = state.as_ref().map_or(&[], |w| &w.slots);
    // Judged at the latest start if now is earlier: no call goes back before
    // a recorded one. Inside live windows, any time from there on finds the
    // same windows, so a write that starts none needs no time recorded.
    let now = stored.iter().flatten().map(|slot| slot.start).fold(now, u64::max);
    let current = |i: usize| live(stored.get(i).copied().flatten().map(Window::pair), &strategies[i], now);
    if let CallKind::Refund(of) = kind {
        let mut slots: Vec<Option<(u64, u64)>> = (0..strategies.len()).map(current).collect();
        return refund(strategies, state, &mut slots, now, cost, of.taken_us);
    }
    let verdict = judge(strategies, (0..strategies.len()).map(|i| count(current(i))), cost);
    // A charge takes its cost whatever the room, counted past the limit.
    let take = (verdict.allowed || kind == CallKind::Charge) && cost > 0;
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

    let write = take && matches!(kind, CallKind::Check | CallKind::Charge);
    let mut moves_expiry = write;
    let known = state.as_ref().is_some_and(|w| w.slots.len() >= strategies.len());
    if write && !known {
        // A new key, or one stored under fewer strategies.
        let slot =
            |i: usize| after(i).map(|(start, count)| Window { start, count, window_us: strategies[i].window_us });
        *state = Some(Windows { slots: (0..strategies.len()).map(slot).collect() });
    } else if let (true, Some(windows)) = (write, state.as_mut()) {
        // Each window follows from its own stored value: written in place.
        let (own, kept) = windows.slots.split_at_mut(strategies.len());
        for (slot, s) in own.iter_mut().zip(strategies) {
            let (start, count) = taken(live(slot.map(Window::pair), s, now), take, now, cost).unwrap_or_default();
            *slot = Some(Window { start, count, window_us: s.window_us });
        }
        // Windows beyond the policy's count the call while they run.
        let mut outlives = false;
        for slot in kept.iter_mut().flatten() {
            if now - slot.start < slot.window_us {
                slot.count = added(slot.count, cost);
                outlives |= slot.start.saturating_add(slot.window_us) > now + reset_after_us;
            }
        }
        // The store keeps the key until this call's reset: while a kept
        // window outlives it, the later end the key was kept to stands.
        moves_expiry = !outlives;
        let ended = |slot: &Option<Window>| slot.is_none_or(|s| now - s.start >= s.window_us);
        while windows.slots.len() > strategies.len() && windows.slots.last().is_some_and(ended) {
            windows.slots.pop();
        }
    }
    // A denied check by a window longer than a running one's own length:
    // that window runs on by the longer, so the key is kept to its end.
    let denied = kind == CallKind::Check && !verdict.allowed && cost > 0 && strategies.iter().all(|s| cost <= s.limit);
    if let (true, Some(windows)) = (denied, state.as_mut()) {
        let mut grown = false;
        for (slot, s) in windows.slots.iter_mut().zip(strategies) {
            if let Some(slot) = slot.as_mut().filter(|slot| now - slot.start < s.window_us) {
                grown |= slot.window_us < s.window_us;
                slot.window_us = slot.window_us.max(s.window_us);
            }
        }
        let within =
            |slot: &Window| now - slot.start >= slot.window_us || slot.start + slot.window_us <= now + reset_after_us;
        moves_expiry = grown && windows.slots.iter().flatten().all(within);
    }
    if kind == CallKind::Charge {
        // Reported as a check of cost 0 on the windows it wrote.
        return (decide(strategies, state, now, 0, CallKind::Peek).0, moves_expiry);
    }
    (verdict.outcome((limit, remaining), (reset_after_us, retry_after_us), now, quotas), moves_expiry)
}

/// A stored window, if it still runs at `now`.
fn live(slot: Option<(u64, u64)>, strategy: &Strategy, now: u64) -> Option<(u64, u64)> {
    slot.filter(|&(start, _)| now - start < strategy.window_us)
}

/// A live window after a call that took `cost` (`take`) or nothing.
fn taken(slot: Option<(u64, u64)>, take: bool, now: u64, cost: u64) -> Option<(u64, u64)> {
    match (slot, take) {
        (Some((start, count)), true) => Some((start, added(count, cost))),
        (None, true) => Some((now, added(0, cost))),
        (slot, false) => slot,
    }
}

/// A count after `cost` more: a check's stays within its limit; a charge
/// adds at most [`MOST_OWED`] at once, as the scripts do.
fn added(count: u64, cost: u64) -> u64 {
    count.saturating_add(cost.min(MOST_OWED))
}

/// Permits a window holds.
fn count(slot: Option<(u64, u64)>) -> u64 {
    slot.map_or(0, |(_, c)| c)
}

/// Gives `cost` back to every window still running at `now` (`live`, then
/// those beyond the policy's by their own lengths) that counted the
/// refunded call, taken at `taken` (it began no later, and still ran then),
/// never below zero, then reports as a check of cost 0 would. A window that
/// ended, or began after that call's ended, has nothing of it to give back.
#[cold]
fn refund(
    strategies: &[Strategy],
    state: &mut Option<Windows>,
    live: &mut [Option<(u64, u64)>],
    now: u64,
    cost: u64,
    taken: u64,
) -> (Outcome, bool) {
    let mut write = false;
    let counted = |start: u64, window_us: u64| start <= taken && taken - start < window_us;
    for (i, slot) in live.iter_mut().enumerate() {
        if let Some((start, count)) = slot {
            if counted(*start, strategies[i].window_us) && cost > 0 && *count > 0 {
                *count = count.saturating_sub(cost);
                write = true;
                // The lowered count, beside the other windows as stored
                // (an ended one's start still bounds how late a call is judged).
                if let Some(Some(stored)) = state.as_mut().and_then(|w| w.slots.get_mut(i)) {
                    stored.count = *count;
                }
            }
        }
    }
    let mut latest_kept = 0;
    for slot in state.iter_mut().flat_map(|w| w.slots.iter_mut().skip(strategies.len())).flatten() {
        if now - slot.start < slot.window_us {
            latest_kept = latest_kept.max(slot.start + slot.window_us);
            if counted(slot.start, slot.window_us) && cost > 0 && slot.count > 0 {
                slot.count = slot.count.saturating_sub(cost);
                write = true;
            }
        }
    }
    let slots = live
        .iter()
        .zip(strategies)
        .map(|(slot, s)| slot.map(|(start, count)| Window { start, count, window_us: s.window_us }))
        .collect();
    let (outcome, _) = decide(strategies, &mut Some(Windows { slots }), now, 0, CallKind::Peek);
    // As for a check: a kept window outliving the reset keeps the key's end.
    (outcome.clone(), write && latest_kept <= outcome.now_us + outcome.reset_after_us)
}
