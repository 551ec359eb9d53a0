//! Twin of `lua/fixed_window.lua`: per strategy, a window started by the first
//! admitted hit after the previous one ended, or, for a calendar strategy,
//! the day, week, month or year of its zone holding the call.
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
use redlimit_grammar::MAX_STRATEGIES;

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

/// How one strategy judges windows at this call: by its length from a
/// window's start, or by the bounds of the calendar window holding the call.
#[derive(Debug, Clone, Copy)]
struct Rule {
    window_us: u64,
    calendar: Option<(u64, u64)>,
}

impl Rule {
    /// Strategy `s`'s rule; the calendar bounds are those of the time the
    /// call carried, as the client works them out for the script.
    fn of(s: &Strategy, now: u64) -> Rule {
        // A validated zone places every time a clock gives; were one
        // unplaceable, the window would be a rolling one of its longest length.
        Rule { window_us: s.window_us, calendar: s.calendar.and_then(|c| c.window_at(now)) }
    }

    /// Where a window this call starts begins.
    fn opening(self, now: u64) -> u64 {
        self.calendar.map_or(now, |(start, _)| start)
    }

    /// When a window that began at `start`, recorded with `length`, ends
    /// under this rule: a calendar window started before the call's has
    /// ended (at its start, as far as this call is concerned); one started
    /// in a later calendar window (a client clock behind the one that
    /// wrote it) runs by its recorded length.
    fn end(self, start: u64, length: u64) -> u64 {
        match self.calendar {
            None => start.saturating_add(self.window_us),
            Some((from, _)) if start < from => start,
            Some((_, until)) if start < until => until,
            Some(_) => start.saturating_add(length),
        }
    }

    /// The length a window that began at `start` runs by under this rule.
    fn length(self, start: u64, length: u64) -> u64 {
        self.end(start, length) - start
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
    // On the stack: a known key's decision allocates nothing.
    let mut rules = [Rule { window_us: 0, calendar: None }; MAX_STRATEGIES];
    for (rule, s) in rules.iter_mut().zip(strategies) {
        *rule = Rule::of(s, now);
    }
    decide_by(strategies, &rules[..strategies.len().min(MAX_STRATEGIES)], state, now, cost, kind)
}

/// [`decide`] by each strategy's rule at this call.
fn decide_by(
    strategies: &[Strategy],
    rules: &[Rule],
    state: &mut Option<Windows>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    // A validated policy has a rule per strategy; the extra ones are left out.
    let strategies = &strategies[..rules.len()];
    let stored: &[Option<Window>] = state.as_ref().map_or(&[], |w| &w.slots);
    // Judged at the latest start if now is earlier: no call goes back before
    // a recorded one. Inside live windows, any time from there on finds the
    // same windows, so a write that starts none needs no time recorded.
    let now = stored.iter().flatten().map(|slot| slot.start).fold(now, u64::max);
    let current = |i: usize| live(stored.get(i).copied().flatten(), rules[i], now);
    if let CallKind::Refund(of) = kind {
        let mut slots: Vec<Option<Window>> = (0..strategies.len()).map(current).collect();
        return refund(strategies, rules, state, &mut slots, now, cost, of.taken_us);
    }
    let verdict = judge(strategies, (0..strategies.len()).map(|i| count(current(i))), cost);
    // A charge takes its cost whatever the room, counted past the limit.
    let take = (verdict.allowed || kind == CallKind::Charge) && cost > 0;
    // The windows as they stand after this call (as if taken, for a peek).
    let after = |i: usize| taken(current(i), rules[i], take, now, cost);
    let (limit, remaining) = least_room(strategies, (0..strategies.len()).map(|i| count(after(i))));
    let end = |i: usize, w: Window| rules[i].end(w.start, w.window_us).saturating_sub(now);
    let ends = |slot: &dyn Fn(usize) -> Option<Window>, mask: u32| {
        (0..strategies.len())
            .filter(|i| mask >> i & 1 == 1)
            .filter_map(|i| slot(i).map(|w| end(i, w)))
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
                    Some(w) => (s.limit.saturating_sub(w.count), end(i, w)),
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
        *state = Some(Windows { slots: (0..strategies.len()).map(after).collect() });
    } else if let (true, Some(windows)) = (write, state.as_mut()) {
        // Each window follows from its own stored value: written in place.
        let (own, kept) = windows.slots.split_at_mut(strategies.len());
        for (slot, &rule) in own.iter_mut().zip(rules) {
            *slot = taken(live(*slot, rule, now), rule, take, now, cost);
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
        for (slot, &rule) in windows.slots.iter_mut().zip(rules) {
            if let Some(slot) = slot.as_mut().filter(|slot| now < rule.end(slot.start, slot.window_us)) {
                let length = rule.length(slot.start, slot.window_us);
                grown |= slot.window_us < length;
                slot.window_us = slot.window_us.max(length);
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

/// A stored window, if it still runs at `now`, by the length `rule` judges it by.
fn live(slot: Option<Window>, rule: Rule, now: u64) -> Option<Window> {
    slot.filter(|w| now < rule.end(w.start, w.window_us))
        .map(|w| Window { window_us: rule.length(w.start, w.window_us), ..w })
}

/// A live window after a call that took `cost` (`take`) or nothing.
fn taken(slot: Option<Window>, rule: Rule, take: bool, now: u64, cost: u64) -> Option<Window> {
    match (slot, take) {
        (Some(w), true) => Some(Window { count: added(w.count, cost), ..w }),
        (None, true) => {
            let start = rule.opening(now);
            Some(Window { start, count: added(0, cost), window_us: rule.length(start, 0) })
        }
        (slot, false) => slot,
    }
}

/// A count after `cost` more: a check's stays within its limit; a charge
/// adds at most [`MOST_OWED`] at once, as the scripts do.
fn added(count: u64, cost: u64) -> u64 {
    count.saturating_add(cost.min(MOST_OWED))
}

/// Permits a window holds.
fn count(slot: Option<Window>) -> u64 {
    slot.map_or(0, |w| w.count)
}

/// Gives `cost` back to every window still running at `now` (`live`, then
/// those beyond the policy's by their own lengths) that counted the
/// refunded call, taken at `taken` (it began no later, and still ran then),
/// never below zero, then reports as a check of cost 0 would. A window that
/// ended, or began after that call's ended, has nothing of it to give back.
#[cold]
fn refund(
    strategies: &[Strategy],
    rules: &[Rule],
    state: &mut Option<Windows>,
    live: &mut [Option<Window>],
    now: u64,
    cost: u64,
    taken: u64,
) -> (Outcome, bool) {
    let mut write = false;
    let counted = |start: u64, window_us: u64| start <= taken && taken - start < window_us;
    for (i, slot) in live.iter_mut().enumerate() {
        if let Some(w) = slot {
            if counted(w.start, w.window_us) && cost > 0 && w.count > 0 {
                w.count = w.count.saturating_sub(cost);
                write = true;
                // The lowered count, beside the other windows as stored
                // (an ended one's start still bounds how late a call is judged).
                if let Some(Some(stored)) = state.as_mut().and_then(|s| s.slots.get_mut(i)) {
                    stored.count = w.count;
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
    let slots = live.to_vec();
    let (outcome, _) = decide_by(strategies, rules, &mut Some(Windows { slots }), now, 0, CallKind::Peek);
    // As for a check: a kept window outliving the reset keeps the key's end.
    (outcome.clone(), write && latest_kept <= outcome.now_us + outcome.reset_after_us)
}
