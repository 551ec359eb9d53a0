//! Twin of `lua/token_bucket.lua`: starts full, refills continuously.
//!
//! With the rate reduced to `n` per `p` µs, one token is `p` units and the
//! bucket gains `n` units per µs, so every refill is exact on integers
//! (1 token per 3 s arrives at exactly 3 s).

use super::{ceil_div, owed_at};
use crate::backend::{CallKind, Outcome};

/// The units missing to be full, when they were last counted, and the
/// rate `(n, p)` they are counted at (a change of rate converts them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    missing: u64,
    last: u64,
    rate: (u64, u64),
}

/// Decides one call; also whether it wrote `state`.
#[inline(always)]
pub(crate) fn decide(
    capacity: u64,
    (n, p): (u64, u64),
    state: &mut Option<Bucket>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let full = capacity * p;
    let (mut units, last) = state.as_ref().map_or((full, now), |b| {
        let (missing, last) = owed_at(b.missing, b.last, b.rate, (n, p), now);
        (full - missing.min(full), last)
    });
    // Judged at the last count if now is earlier: a late call finds no
    // more than the bucket held then.
    let now = now.max(last);
    let gained = ((now - last) as u128) * n as u128;
    units = if gained >= (full - units) as u128 { full } else { units + gained as u64 };

    // A refund puts its tokens back, never above full, then reports the
    // bucket as a check of cost 0 would.
    let given = cost;
    let cost = match kind {
        CallKind::Refund(_) => {
            let back = cost.saturating_mul(p);
            units = if back >= full - units { full } else { units + back };
            0
        }
        _ => cost,
    };
    let never = cost > capacity;
    let need = if never { 0 } else { cost * p };
    let allowed = !never && units >= need;
    let after = if allowed { units - need } else { units };
    let retry_after_us = (!allowed && !never).then(|| ceil_div((need - units) as u128, n as u128) as u64);
    let write = match kind {
        CallKind::Check => allowed && cost > 0,
        // Nothing to give back to an untouched bucket.
        CallKind::Refund(_) => state.is_some() && given > 0,
        // A peek; a permit's calls never reach this algorithm (`refused`).
        _ => false,
    };
    if write {
        *state = Some(Bucket { missing: full - after, last: now, rate: (n, p) });
    }
    let outcome = Outcome {
        allowed,
        limit: capacity,
        remaining: after / p,
        reset_after_us: ceil_div((full - after) as u128, n as u128) as u64,
        retry_after_us,
        violated: 0,
        now_us: now,
        quotas: Vec::new(),
    };
    (outcome, write)
}
