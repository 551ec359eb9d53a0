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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Threads spend one refill's permits while one of them takes the rest
    /// out midway: each permit leaves once (spent, or taken out), and
    /// none is left to spend after.
    #[test]
    fn every_permit_leaves_once_spent_or_taken_out() {
        let policy = (7, false);
        let taken = crate::limiter::on_error::unsettled(true, 100, std::time::SystemTime::now());
        let held = Arc::new(Held::new(40_000, policy, (u64::MAX, None), taken, 0));
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let held = held.clone();
                std::thread::spawn(move || {
                    let (mut spent, mut took) = (0, 0);
                    while let Some(decision) = held.spend(policy, 1, 1) {
                        assert!(decision.allowed);
                        spent += 1;
                        if thread == 0 && spent == 5_000 {
                            took = held.take();
                        }
                    }
                    (spent, took)
                })
            })
            .collect();
        let (spent, took) = threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .fold((0, 0), |sum, each| (sum.0 + each.0, sum.1 + each.1));
        assert_eq!(spent + took, 40_000);
        assert_eq!((held.left(), held.spend(policy, 1, 1)), (0, None));
    }

    #[test]
    fn only_its_policy_spends_it_and_only_before_it_expires() {
        let taken = crate::limiter::on_error::unsettled(true, 10, std::time::SystemTime::now());
        let remaining = taken.remaining;
        let held = Held::new(3, (7, false), (50, None), taken, 0);
        assert!(held.spend((7, true), 1, 10).is_none(), "a trial of the policy is another");
        assert!(held.spend((8, false), 1, 10).is_none());
        assert!(held.spend((7, false), 1, 50).is_none(), "expired");
        assert!(held.spend((7, false), 4, 10).is_none(), "more than held");
        assert_eq!(
            held.spend((7, false), 2, 10).map(|d| d.remaining),
            Some(remaining + 1),
            "the one left here counted"
        );
        assert_eq!(held.left(), 1);
    }
}
