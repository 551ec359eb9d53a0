//! One key's local quota under prefetch: permits taken from the store in one
//! call, spent here one call at a time until they run out or expire.
//! `prefetch.rs` owns the quotas of a limiter; this file decides one call.

use crate::backend::{CallKind, Refunded};
use crate::{AlgorithmKind, Decision, Error, Limiter};
use std::time::Duration;

/// What this process holds of one key's permits, and how much it takes next.
#[derive(Debug, Default)]
pub(crate) struct LocalQuota {
    /// Permits taken from the store and not spent yet.
    left: u64,
    /// Until when they may be spent (µs, on the limiter's clock).
    expires_us: u64,
    /// When the fixed window they were taken in ends at the earliest (µs):
    /// an expired quota past it has nothing to give back.
    window_end_us: Option<u64>,
    /// The store's answer to the call that took them, with `remaining`
    /// counting none of `left`: what a call spent here answers, aged.
    taken: Option<(Decision, u64)>,
    /// How many permits the next refill asks for.
    size: u64,
    /// When the last refill was sent, if it was allowed.
    last_refill_us: Option<u64>,
}

/// What became of permits this quota let go of.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LetGo {
    pub(crate) returned: u64,
    pub(crate) wasted: u64,
}

/// One call's part in the counts: permits taken from the store, spent, let go.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Moved {
    pub(crate) prefetched: u64,
    pub(crate) spent: u64,
    pub(crate) let_go: LetGo,
}

/// One key's quota under one policy: its state, behind a lock no call
/// holds across an await (spending is a few loads and stores), and the
/// lock a refill holds while it asks the store, so one refill at a time
/// goes out per key and process while other calls wait for its permits.
#[derive(Debug)]
pub(crate) struct Quota {
    pub(crate) state: std::sync::Mutex<LocalQuota>,
    refill: tokio::sync::Mutex<()>,
    /// The limiter the permits come from (without prefetch: its refunds go
    /// straight to the store).
    pub(crate) limiter: Limiter,
}

impl Quota {
    pub(crate) fn new(limiter: Limiter) -> Quota {
        Quota { state: Default::default(), refill: tokio::sync::Mutex::new(()), limiter }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, LocalQuota> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decides a call of `cost` (> 0) for `key`, taking up to `max` permits
    /// from the store when the local ones do not cover it. `ttl_us` bounds
    /// how long a bucket's or GCRA's permits stay here, and is how soon a
    /// refill must follow the last one for the next to grow.
    pub(crate) async fn decide(
        &self,
        key: &[u8],
        cost: u64,
        (max, ttl_us): (u64, u64),
        moved: &mut Moved,
    ) -> Result<Decision, Error> {
        let limiter = &self.limiter;
        if let Some(spent) = self.state().spend(cost, now_us(limiter), moved) {
            return Ok(spent);
        }
        let _refilling = self.refill.lock().await;
        // Another call's refill may have come back while this one waited.
        let now = now_us(limiter);
        let (left, window_end_us, of, size) = {
            let mut state = self.state();
            if let Some(spent) = state.spend(cost, now, moved) {
                return Ok(spent);
            }
            // A key called less often than once per ttl takes only its own
            // cost, so it gets exactly the answers it gets without prefetch.
            state.size = match state.last_refill_us {
                Some(last) if now.saturating_sub(last) <= ttl_us => state.size.saturating_mul(2).clamp(1, max),
                _ => 1,
            };
            (std::mem::take(&mut state.left), state.window_end_us, state.refunded(), state.size)
        };
        if left > 0 {
            moved.let_go = let_go(limiter, key, left, (window_end_us, of), now).await;
        }
        let (decision, took) = take(limiter, key, cost, cost.max(size)).await?;
        let mut state = self.state();
        if !decision.allowed {
            // Near the limit: ask for the call's own cost again, as without prefetch.
            state.last_refill_us = None;
            return Ok(decision);
        }
        let window_end_us = window_reset_us(limiter, &decision).map(|reset| now.saturating_add(reset));
        // Counted from when the refill was sent: the store judged it no
        // earlier, so its window ends no earlier than this.
        state.expires_us = now.saturating_add(window_end_us.map_or(ttl_us, |end| (end - now).min(ttl_us)));
        state.window_end_us = window_end_us;
        state.left = took - cost;
        state.last_refill_us = Some(now);
        state.taken = Some((decision, now));
        *moved = Moved { prefetched: took, spent: cost, ..*moved };
        Ok(state.answer(now))
    }
}

impl LocalQuota {
    /// Spends `cost` of the local permits, if they cover it and have not expired.
    fn spend(&mut self, cost: u64, now: u64, moved: &mut Moved) -> Option<Decision> {
        if self.left < cost || now >= self.expires_us {
            return None;
        }
        self.left -= cost;
        moved.spent = cost;
        Some(self.answer(now))
    }

    /// Forgets the local permits (the key was reset in the store); how many.
    pub(crate) fn forget(&mut self) -> u64 {
        self.last_refill_us = None;
        std::mem::take(&mut self.left)
    }

    /// Whether this quota holds nothing worth keeping at `now`: no permits
    /// (expired ones are given back by the key's next call, which a dropped
    /// quota would never make) and no recent refill to grow from.
    pub(crate) fn idle(&self, now: u64, ttl_us: u64) -> bool {
        self.left == 0 && self.last_refill_us.is_none_or(|last| now.saturating_sub(last) > ttl_us)
    }

    /// The permits still held, when their window ends and the refill that
    /// took them, taken out to give back.
    pub(crate) fn take_left(&mut self) -> (u64, (Option<u64>, Option<Refunded>)) {
        (std::mem::take(&mut self.left), (self.window_end_us, self.refunded()))
    }

    /// The refill that took the local permits: what giving them back refunds.
    fn refunded(&self) -> Option<Refunded> {
        self.taken.as_ref().map(|(decision, _)| Refunded::of(decision))
    }

    /// The answer of a call that leaves `self.left` here: the refill's
    /// decision aged to `now`, its `remaining` counting the local permits.
    fn answer(&self, now: u64) -> Decision {
        let Some((decision, at)) = &self.taken else {
            // Unreachable: permits are only spent after a refill recorded its answer.
            return crate::on_error::unsettled(true, self.left, std::time::SystemTime::now());
        };
        let elapsed = Duration::from_micros(now.saturating_sub(*at));
        let mut decision = decision.clone();
        decision.remaining = decision.remaining.saturating_add(self.left);
        decision.reset_after = decision.reset_after.saturating_sub(elapsed);
        decision.decided_at += elapsed;
        for quota in &mut decision.quotas {
            quota.remaining = quota.remaining.saturating_add(self.left);
            quota.reset_after = quota.reset_after.saturating_sub(elapsed);
        }
        decision
    }
}

/// Gives back `left` permits of the refill `of`: refunded while they may
/// still count in the store, else wasted (a fixed window that ended at
/// `window_end_us`).
pub(crate) async fn let_go(
    limiter: &Limiter,
    key: &[u8],
    left: u64,
    (window_end_us, of): (Option<u64>, Option<Refunded>),
    now: u64,
) -> LetGo {
    if left == 0 {
        return LetGo::default();
    }
    let Some(of) = of.filter(|_| window_end_us.is_none_or(|end| now < end)) else {
        return LetGo { returned: 0, wasted: left };
    };
    match limiter.refund_of(key, left, of).await {
        Ok(_) => LetGo { returned: left, wasted: 0 },
        Err(_) => LetGo { returned: 0, wasted: left },
    }
}

/// Takes `n` (>= `cost`) permits, or fewer: when `n` is denied but the
/// store says some remain, as many as remain; when fewer than `cost`
/// remain, the call's own cost, so a denial is the one the call gets
/// without prefetch (its `retry_after` is for `cost`). Each try goes
/// through the pipeline (deny cache, store), uncounted: the caller counts
/// the one decision.
async fn take(limiter: &Limiter, key: &[u8], cost: u64, mut n: u64) -> Result<(Decision, u64), Error> {
    for _ in 0..3 {
        let decision = limiter.run(key, n, CallKind::Check).await?;
        if decision.allowed || n == cost {
            return Ok((decision, n));
        }
        n = match decision.remaining >= cost {
            true => decision.remaining.min(n - 1),
            false => cost,
        };
    }
    let decision = limiter.run(key, cost, CallKind::Check).await?;
    Ok((decision, cost))
}

/// Until a fixed window decision's earliest window ends (µs); `None` for
/// the other algorithms, whose permits carry no end.
fn window_reset_us(limiter: &Limiter, decision: &Decision) -> Option<u64> {
    if limiter.rule.policy.algorithm() != AlgorithmKind::FixedWindow {
        return None;
    }
    let earliest = decision.quotas.iter().map(|quota| quota.reset_after).min().unwrap_or(decision.reset_after);
    Some(u64::try_from(earliest.as_micros()).unwrap_or(u64::MAX))
}

/// Now on the limiter's clock, or this process's when the store keeps its own.
pub(crate) fn now_us(limiter: &Limiter) -> u64 {
    limiter.inner.store.clock.now_us().unwrap_or_else(crate::clock::process_now_us)
}
