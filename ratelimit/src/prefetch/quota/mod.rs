//! One key's local quota under prefetch: permits taken from the store in one
//! call, spent here one call at a time until they run out or expire.
//! `prefetch/mod.rs` owns the quotas of a limiter; this file decides one call.
//! A call that can spend takes no lock (`held.rs`); the quota's lock
//! (`local.rs`) orders the rest: refills, their waiters, give-backs.
//!
//! A key has one quota whatever policy decides it, holding the permits of
//! one policy at a time: a call under another policy gives them back with
//! its refill. One refill at a time goes out per key and process. A call
//! that finds one in flight waits for it if it has room for the call, and
//! for no other: if it leaves the call nothing to spend, the call shares its
//! denial (same policy and cost, its `retry_after` not passed) or its
//! failure, or else makes its own call (the next refill, or a check of its
//! cost alone). A call the refill in flight has no room for goes to the
//! store alone at once, and the next refill asks for it too. So a call
//! waits at most one refill's round trip longer than without prefetch, and
//! its whole wait (for the refill in flight, then its own calls, a
//! refill's several tries included) ends at its [`Deadline`]: past it, the
//! call fails with the store's `Error::Timeout`.

mod deadline;
mod held;
mod local;

use crate::call::{Call, Refunded};
use crate::decision::Decision;
use crate::error::Error;
use crate::Limiter;
pub(crate) use deadline::Deadline;
pub(crate) use local::LocalQuota;
use local::{Arrival, Refilled, Slot};
use redlimit_grammar::AlgorithmKind;

/// Which policy permits were taken under: its fingerprint and whether it is a dry run.
pub(crate) type PolicyId = (u64, bool);

pub(crate) fn policy_id(limiter: &Limiter) -> PolicyId {
    (limiter.rule.fingerprint(), limiter.rule.policy.is_dry_run())
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

/// Permits taken out of a quota to give back.
#[derive(Debug)]
pub(crate) struct Unspent {
    pub(crate) left: u64,
    pub(crate) window_end_us: Option<u64>,
    pub(crate) from: Option<Limiter>,
    /// The refill that took them: what giving them back refunds.
    pub(crate) of: Option<Refunded>,
}

impl Unspent {
    /// Gives them back: refunded while they may still count in the store,
    /// else wasted (a fixed window that ended, a refund that failed).
    pub(crate) async fn let_go(self, key: &[u8], now: u64) -> LetGo {
        match self.from {
            Some(from) => let_go(&from, key, self.left, (self.window_end_us, self.of), now).await,
            None => LetGo { returned: 0, wasted: self.left },
        }
    }

    /// [`let_go`](Self::let_go) by a call's `deadline`: a give-back cut
    /// there is counted as a refund that failed.
    async fn let_go_within(self, key: &[u8], now: u64, deadline: Deadline) -> LetGo {
        let wasted = LetGo { returned: 0, wasted: self.left };
        deadline.within(self.let_go(key, now)).await.unwrap_or(wasted)
    }
}

/// One key's quota: the permits held, which calls spend without a lock;
/// its refills' state, behind a lock no call holds across an await; and
/// the wake-up of the calls waiting for a refill.
#[derive(Debug, Default)]
pub(crate) struct KeyQuota {
    held: Slot,
    state: std::sync::Mutex<LocalQuota>,
    refilled: tokio::sync::Notify,
}

/// Ends a refill however its call ends (a dropped future included): no
/// refill is in flight any more, and its waiters wake.
struct Refilling<'a> {
    quota: &'a KeyQuota,
    /// The refills come back when this one was sent: it is the one in flight while they stay this many.
    refill: u64,
}

impl Drop for Refilling<'_> {
    fn drop(&mut self) {
        self.quota.state().abandon(self.refill);
        self.quota.refilled.notify_waiters();
    }
}

/// A call counted in the room of the refill it waits for: dropped before
/// that refill comes back (the call was cancelled), it gives the room back.
struct InRoom<'a> {
    quota: &'a KeyQuota,
    cost: u64,
    /// The refills come back when the call began to wait.
    refill: u64,
}

impl Drop for InRoom<'_> {
    fn drop(&mut self) {
        self.quota.state().leave(self.refill, self.cost);
    }
}

impl KeyQuota {
    fn state(&self) -> std::sync::MutexGuard<'_, LocalQuota> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spends `cost` of the permits held, if they are `policy`'s, cover it
    /// and have not expired at `now`; takes no lock.
    pub(crate) fn spend(&self, policy: PolicyId, cost: u64, now: u64, moved: &mut Moved) -> Option<Decision> {
        let decision = self.held.load().as_ref()?.spend(policy, cost, now)?;
        moved.spent = cost;
        Some(decision)
    }

    /// Whether this quota may be dropped at `now` (see [`LocalQuota::idle`]).
    pub(crate) fn idle(&self, now: u64, ttl_us: u64, pressed: bool) -> bool {
        self.state().idle(now, ttl_us, pressed, &self.held)
    }

    /// The permits still held, taken out to give back.
    pub(crate) fn take_held(&self) -> Option<Unspent> {
        self.state().take_held(&self.held)
    }

    /// Forgets the permits held, the key having been reset through
    /// `reset_by` (see [`LocalQuota::forget`]); how many.
    pub(crate) fn forget(&self, reset_by: &Limiter) -> Option<u64> {
        self.state().forget(reset_by, &self.held)
    }

    /// Decides `limiter`'s call of `cost` (> 0) for `key`, taking up to
    /// `max` permits from the store when the local ones do not cover it.
    /// `ttl_us` bounds how long a bucket's or GCRA's permits stay here, and
    /// is how soon a refill must follow the last one for the next to grow.
    /// Waiting and store calls end by `deadline`.
    pub(crate) async fn decide(
        &self,
        limiter: &Limiter,
        key: &[u8],
        cost: u64,
        (max, ttl_us): (u64, u64),
        (moved, deadline): (&mut Moved, Deadline),
    ) -> Result<Decision, Error> {
        let policy = policy_id(limiter);
        let waiting = {
            let mut state = self.state();
            let now = now_us(limiter);
            // Under the lock a refill settles under: spends what it just brought.
            if let Some(spent) = self.spend(policy, cost, now, moved) {
                return Ok(spent);
            }
            match state.arrive(policy, cost, now) {
                Arrival::Refill => Ok(None),
                // Made under the lock the refill ends under: its wake-up cannot be missed.
                Arrival::Wait { seen, cost } => Ok(Some((self.refilled.notified(), seen, cost))),
                Arrival::Alone => Err(()),
            }
        };
        let Ok(waiting) = waiting else {
            return alone(limiter, key, cost, (moved, deadline)).await;
        };
        if let Some((refilled, seen, counted)) = waiting {
            let _room = InRoom { quota: self, cost: counted, refill: seen };
            deadline.within(refilled).await?;
            let state = self.state();
            let now = now_us(limiter);
            if let Some(spent) = self.spend(policy, cost, now, moved) {
                return Ok(spent);
            }
            if let Some(shared) = state.shared(policy, cost, seen, now) {
                return shared;
            }
        }
        self.refill(limiter, key, cost, (max, ttl_us), (moved, deadline)).await
    }

    /// This call's own call to the store: a refill, unless another call
    /// sent one meanwhile; none past the deadline (a refill that did not go
    /// out has no failure for others to share), though permits held here
    /// are still spent.
    async fn refill(
        &self,
        limiter: &Limiter,
        key: &[u8],
        cost: u64,
        (max, ttl_us): (u64, u64),
        (moved, deadline): (&mut Moved, Deadline),
    ) -> Result<Decision, Error> {
        let policy = policy_id(limiter);
        let sent = now_us(limiter);
        let refill = {
            let mut state = self.state();
            if let Some(spent) = self.spend(policy, cost, sent, moved) {
                return Ok(spent);
            }
            if let Some(timed_out) = deadline.passed() {
                return Err(timed_out);
            }
            let free = !state.is_refilling();
            free.then(|| state.begin_refill(policy, cost, sent, (max, ttl_us), &self.held))
        };
        let Some((held, size, refill)) = refill else {
            return alone(limiter, key, cost, (moved, deadline)).await;
        };
        let _refilling = Refilling { quota: self, refill };
        let taking = deadline.by(take(limiter, key, cost, cost.max(size)));
        // Sent together: the give-back costs no round trip of its own.
        let (let_go, taken) = match held {
            Some(held) => tokio::join!(held.let_go_within(key, sent, deadline), taking),
            None => (LetGo::default(), taking.await),
        };
        moved.let_go = let_go;
        let window_reset_us = taken.as_ref().ok().and_then(|(decision, _)| window_reset_us(limiter, decision));
        let refilled = Refilled { policy, cost, sent, back: now_us(limiter), ttl_us, window_reset_us };
        // Settled, and the lock let go, before `_refilling` wakes the waiters.
        let answer = self.state().settle(limiter, (refilled, taken), moved, &self.held);
        answer
    }
}

/// A call decided by the store alone, as without prefetch, by `deadline`:
/// counted as a refill of its own cost, spent at once.
pub(crate) async fn alone(
    limiter: &Limiter,
    key: &[u8],
    cost: u64,
    (moved, deadline): (&mut Moved, Deadline),
) -> Result<Decision, Error> {
    let result = deadline.by(limiter.asked(Call::check(key, cost))).await;
    if result.as_ref().is_ok_and(|decision| decision.allowed) {
        *moved = Moved { prefetched: cost, spent: cost, ..*moved };
    }
    result
}

/// Gives back `left` permits of the refill `of`: refunded while they may
/// still count in the store, else wasted (a fixed window that ended at
/// `window_end_us`).
async fn let_go(
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
/// the one decision, and bounds the tries together by its deadline.
async fn take(limiter: &Limiter, key: &[u8], cost: u64, mut n: u64) -> Result<(Decision, u64), Error> {
    for _ in 0..3 {
        let decision = limiter.asked(Call::check(key, n)).await?;
        if decision.allowed || n == cost {
            return Ok((decision, n));
        }
        n = match decision.remaining >= cost {
            true => decision.remaining.min(n - 1),
            false => cost,
        };
    }
    let decision = limiter.asked(Call::check(key, cost)).await?;
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
