//! Twin of `lua/leaky_bucket.lua`: starts empty, drains continuously; a call
//! adds its cost to the level and passes if the level stays within capacity.
//!
//! Units as in the token bucket: one request is `p` units, the bucket drains
//! `n` units per µs (rate reduced to `n` per `p` µs).
//!
//! The level is what the key owes, whatever the capacity: a call under a
//! smaller capacity than the one that raised it is judged against the
//! whole level and a write keeps it, so a plan change never forgets it.

use super::{ceil_div, owed_at, refunded_units};
use crate::backend::{CallKind, Outcome};

/// Water level in units, when it was last drained, and the rate `(n, p)`
/// it drains at (a change of rate converts it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeakyBucket {
    level: u64,
    last: u64,
    rate: (u64, u64),
}

/// Decides one call; also whether it wrote `state`.
#[inline(always)]
pub(crate) fn decide(
    capacity: u64,
    (n, p): (u64, u64),
    state: &mut Option<LeakyBucket>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let full = capacity * p;
    // The rate the level was written at (a refund's pace), and `converted`:
    // the level was counted at another rate, now this one's.
    let was = state.as_ref().map_or((n, p), |b| b.rate);
    let (mut level, last, converted) = state.as_ref().map_or((0, now, false), |b| {
        let (level, last) = owed_at(b.level, b.last, b.rate, (n, p), now);
        (level, last, b.rate != (n, p))
    });
    // Judged at the last drain if now is earlier: a late call finds the
    // bucket no emptier than it was then.
    let now = now.max(last);
    let drained = ((now - last) as u128) * n as u128;
    level = if drained >= level as u128 { 0 } else { level - drained as u64 };

    // A refund lowers the level by what its call may still hold
    // (`refunded_units`), never below empty, then reports the bucket as a
    // check of cost 0 would.
    let before = level;
    let cost = match kind {
        CallKind::Refund(refunded) => {
            level -= refunded_units(cost, refunded.taken_us, (n, p), was, now).min(level);
            0
        }
        _ => cost,
    };

    let never = cost > capacity;
    let need = if never { 0 } else { cost * p };
    let allowed = !never && level + need <= full;
    let after = if allowed { level + need } else { level };
    let retry_after_us = (!allowed && !never).then(|| ceil_div((level + need - full) as u128, n as u128) as u64);
    // A level counted at another rate is written in this one's, even by a
    // denial: the retry it names drains at this rate.
    let converts = converted && after > 0;
    let write = match kind {
        CallKind::Check => (allowed && cost > 0) || converts,
        CallKind::Refund(_) => after < before || converts,
        // A peek; a permit's calls never reach this algorithm (`refused`).
        _ => false,
    };
    if write {
        *state = Some(LeakyBucket { level: after, last: now, rate: (n, p) });
    }
    let outcome = Outcome {
        allowed,
        limit: capacity,
        remaining: full.saturating_sub(after) / p,
        reset_after_us: ceil_div(after as u128, n as u128) as u64,
        retry_after_us,
        violated: 0,
        now_us: now,
        quotas: Vec::new(),
    };
    (outcome, write)
}
