//! [`Held`]: the permits one refill took, spent without a lock. A call of a
//! hot key takes its cost off their count with a compare-and-swap; the
//! quota's lock is taken only to refill, expire, give back or forget them.
//! A permit leaves the count once: spent by one swap, or taken out whole
//! to give back, after which no swap finds it.

use super::PolicyId;
use crate::backend::Refunded;
use crate::decision::Decision;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What one refill took and this process has not spent yet. Only `left`
/// changes: a refill that comes back replaces the whole.
#[derive(Debug)]
pub(crate) struct Held {
    /// Permits taken from the store and not spent yet.
    left: AtomicU64,
    /// The policy they were taken under: they are spent only under it.
    pub(crate) policy: PolicyId,
    /// Until when they may be spent (µs, on the limiter's clock).
    pub(crate) expires_us: u64,
    /// When the fixed window they were taken in ends at the earliest (µs):
    /// expired past it, they have nothing to give back.
    pub(crate) window_end_us: Option<u64>,
    /// The store's answer to the refill, with `remaining` counting none of
    /// `left`, and when it was sent: what a call spent here answers, aged.
    taken: Decision,
    sent_us: u64,
}

impl Held {
    pub(crate) fn new(
        left: u64,
        policy: PolicyId,
        (expires_us, window_end_us): (u64, Option<u64>),
        taken: Decision,
        sent_us: u64,
    ) -> Held {
        Held { left: AtomicU64::new(left), policy, expires_us, window_end_us, taken, sent_us }
    }

    /// Spends `cost` of them, if they are `policy`'s, cover it and have not
    /// expired at `now`: the call's answer.
    pub(crate) fn spend(&self, policy: PolicyId, cost: u64, now: u64) -> Option<Decision> {
        if now >= self.expires_us || self.policy != policy {
            return None;
        }
        let mut left = self.left.load(Ordering::Acquire);
        loop {
            let rest = left.checked_sub(cost)?;
            match self.left.compare_exchange_weak(left, rest, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(self.answer(now, rest)),
                Err(seen) => left = seen,
            }
        }
    }

    /// How many are left now (others may spend them meanwhile).
    pub(crate) fn left(&self) -> u64 {
        self.left.load(Ordering::Acquire)
    }

    /// Takes out every permit left, to give back or forget: none can be spent after.
    pub(crate) fn take(&self) -> u64 {
        self.left.swap(0, Ordering::AcqRel)
    }

    /// What giving them back refunds: the refill that took them.
    pub(crate) fn refunded(&self) -> Refunded {
        Refunded::of(&self.taken)
    }

    /// The answer of a call that leaves `left` here: the refill's decision
    /// aged to `now`, its `remaining` counting the local permits.
    pub(crate) fn answer(&self, now: u64, left: u64) -> Decision {
        aged(&self.taken, Duration::from_micros(now.saturating_sub(self.sent_us)), left)
    }
}

/// `decision` as it reads `elapsed` later, with `more` permits remaining.
pub(crate) fn aged(decision: &Decision, elapsed: Duration, more: u64) -> Decision {
    let mut decision = decision.clone();
    decision.remaining = decision.remaining.saturating_add(more);
    decision.reset_after = decision.reset_after.saturating_sub(elapsed);
    decision.retry_after = decision.retry_after.map(|retry| retry.saturating_sub(elapsed));
    decision.decided_at += elapsed;
    for quota in &mut decision.quotas {
        quota.remaining = quota.remaining.saturating_add(more);
        quota.reset_after = quota.reset_after.saturating_sub(elapsed);
        quota.retry_after = quota.retry_after.and_then(|retry| retry.checked_sub(elapsed)).filter(|r| !r.is_zero());
    }
    decision
}
