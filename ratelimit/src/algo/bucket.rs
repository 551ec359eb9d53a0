//! Twin of `lua/token_bucket.lua` and `lua/leaky_bucket.lua`, the same
//! arithmetic under two names: a token bucket starts full and refills
//! continuously, a leaky bucket starts empty and drains continuously, and
//! either way what a key owes is the units it misses to be full (the
//! tokens taken) or its level (the water poured in).
//!
//! With the rate reduced to `n` per `p` µs, one permit is `p` units and the
//! bucket pays off `n` units per µs, so every refill is exact on integers
//! (1 token per 3 s arrives at exactly 3 s).
//!
//! A token bucket may refill by interval: `step` is then its period, and
//! only the periods (counted from the epoch) that ended pay anything, all
//! of a period's units at once (`counted`); `step` 1 is the continuous
//! refill, so both are one path. Waits end on a period's end (`paid_after`).
//!
//! What a key owes is kept whatever the capacity: a call under a smaller
//! capacity than the one that took it is judged against the whole debt
//! (`owed + cost * p <= full`) and a write keeps it, so a plan change never
//! forgets what a larger plan took.

use super::{charged, counted, owed_at, paid_after, refunded_units, Pace};
use crate::backend::{CallKind, Outcome};

/// The units a key owes, when they were last counted, and the pace
/// `(n, p, step)` they are counted and paid at (a change of rate converts
/// them; a refund after a change of rate or refill is bounded by both).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    owed: u64,
    last: u64,
    pace: Pace,
}

/// Decides one call; also whether it wrote `state`.
#[inline(always)]
pub(crate) fn decide(
    capacity: u64,
    (n, p): (u64, u64),
    step: u64,
    state: &mut Option<Bucket>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let full = capacity * p;
    let pace = (n, p, step);
    // The pace the state was written at (a refund's bound), and `converted`:
    // the state was counted at another rate, now this one's.
    let was = state.as_ref().map_or(pace, |b| b.pace);
    let (mut owed, last, converted) = state.as_ref().map_or((0, now, false), |b| {
        let (owed, last) = owed_at(b.owed, b.last, b.pace, (n, p), now);
        (owed, last, (b.pace.0, b.pace.1) != (n, p))
    });
    // Judged at the last count if now is earlier: a late call finds the
    // bucket owing no less than it did then.
    let now = now.max(last);
    let paid = (counted(last, now, step) as u128) * n as u128;
    owed = if paid >= owed as u128 { 0 } else { owed - paid as u64 };

    // A refund gives back what its call may still owe (`refunded_units`),
    // never past an untouched bucket; a charge adds its cost whatever the
    // room (`charged`); either then reports as a check of cost 0 would.
    let before = owed;
    let cost = match kind {
        CallKind::Refund(refunded) => {
            owed -= refunded_units(cost, refunded.taken_us, pace, was, now).min(owed);
            0
        }
        CallKind::Charge => {
            owed = charged(owed, cost, p);
            0
        }
        _ => cost,
    };
    let never = cost > capacity;
    let need = if never { 0 } else { cost * p };
    let allowed = !never && owed + need <= full;
    let after = if allowed { owed + need } else { owed };
    let retry_after_us = (!allowed && !never).then(|| paid_after((owed + need - full) as u128, n, step, now));
    // A debt counted at another rate is written in this one's, even by a
    // denial: the retry it names is paid off at this rate.
    let converts = converted && after > 0;
    let write = match kind {
        CallKind::Check => (allowed && cost > 0) || converts,
        CallKind::Refund(_) | CallKind::Charge => after != before || converts,
        // A peek; a permit's calls never reach this algorithm (`refused`).
        _ => false,
    };
    if write {
        *state = Some(Bucket { owed: after, last: now, pace });
    }
    let outcome = Outcome {
        allowed,
        limit: capacity,
        remaining: full.saturating_sub(after) / p,
        reset_after_us: paid_after(after as u128, n, step, now),
        retry_after_us,
        violated: 0,
        now_us: now,
        quotas: Vec::new(),
    };
    (outcome, write)
}
