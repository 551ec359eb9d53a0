//! Twin of `lua/gcra.lua`: redis-cell's `CL.THROTTLE`, exactly.
//!
//! With the rate reduced to `n` per `p` µs, the emission interval T is `p`
//! units of `1/n` µs, the tolerance is `(burst + 1) * T`, and the theoretical
//! arrival time (TAT) is kept as whole µs plus a remainder in units, so no
//! rounding ever accumulates.
//!
//! A call is judged at its own time, even before an earlier call's: every
//! write leaves the TAT after its own time, so a late call finds more debt,
//! never more room, and the admitted calls sorted by time still conform.

use super::{ceil_div, charged, owed_under, refunded_units};
use crate::backend::{CallKind, Outcome};

/// Theoretical arrival time: `us + rem / n` microseconds since the epoch,
/// and the rate `(n, p)` it was written under (a change of rate converts
/// the debt it leaves).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tat {
    us: u64,
    rem: u64,
    n: u64,
    p: u64,
}

/// Decides one call; also whether it wrote `state`.
#[inline(always)]
pub(crate) fn decide(
    burst: u64,
    (n, p): (u64, u64),
    state: &mut Option<Tat>,
    now: u64,
    cost: u64,
    kind: CallKind,
) -> (Outcome, bool) {
    let limit = burst + 1;
    let tolerance = limit * p;
    // How far the TAT is ahead of now, in units (redis-cell's `ttl`).
    let mut debt = match state {
        Some(t) if t.us >= now => owed_under((t.us - now).saturating_mul(t.n).saturating_add(t.rem), t.p, p),
        _ => 0,
    };
    // The TAT was written under another rate: its debt, now in this one's units.
    let was = state.map_or((n, p), |t| (t.n, t.p));
    let converted = was != (n, p);
    // A refund moves the TAT back by its call's emission intervals less the
    // time since it was taken (`refunded_units`), never before now, then
    // reports as a check of cost 0 would. A TAT already past owes nothing:
    // nothing to give back, nothing written.
    let before = debt;
    let cost = match kind {
        CallKind::Refund(refunded) => {
            debt -= refunded_units(cost, refunded.taken_us, (n, p, 1), (was.0, was.1, 1), now).min(debt);
            0
        }
        // A charge moves the TAT on by its cost whatever the room.
        CallKind::Charge => {
            debt = charged(debt, cost, p);
            0
        }
        _ => cost,
    };
    let never = cost > limit;
    let increment = if never { 0 } else { cost * p };
    let allowed = !never && debt.saturating_add(increment) <= tolerance;
    let ttl = if allowed { debt + increment } else { debt };
    let retry_after_us =
        (!allowed && !never).then(|| ceil_div((debt.saturating_add(increment) - tolerance) as u128, n as u128) as u64);
    // One division gives both the new TAT and `reset_after` (ttl / n, rounded up).
    let (whole_us, rem) = (ttl / n, ttl % n);
    // A debt left under another rate is written at this one, even by a
    // denial: the retry it names is paid off at this rate.
    let converts = converted && ttl > 0;
    let write = match kind {
        CallKind::Check => (allowed && cost > 0) || converts,
        CallKind::Refund(_) | CallKind::Charge => debt != before || converts,
        // A peek; a permit's calls never reach this algorithm (`refused`).
        _ => false,
    };
    if write {
        *state = Some(Tat { us: now + whole_us, rem, n, p });
    }
    let outcome = Outcome {
        allowed,
        limit,
        remaining: tolerance.saturating_sub(ttl) / p,
        reset_after_us: whole_us + u64::from(rem != 0),
        retry_after_us,
        violated: 0,
        now_us: now,
        quotas: Vec::new(),
    };
    (outcome, write)
}
