//! One key's local quota under prefetch: permits taken from the store in one
//! call, spent here one call at a time until they run out or expire.
//! `prefetch.rs` owns the quotas of a limiter; this file decides one call.
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
//! waits at most one refill's round trip longer than without prefetch.

use crate::backend::{CallKind, Refunded};
use crate::{AlgorithmKind, Decision, Error, Limiter};
use std::time::Duration;

/// Which policy permits were taken under: its fingerprint and whether it is a dry run.
pub(crate) type PolicyId = (u64, bool);

fn policy_id(limiter: &Limiter) -> PolicyId {
    (limiter.rule.fingerprint(), limiter.rule.policy.is_dry_run())
}

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
    /// The limiter (without prefetch) whose policy took them: they are spent
    /// only under that policy, and given back through it.
    from: Option<(Limiter, PolicyId)>,
    /// The store's answer to the call that took them, with `remaining`
    /// counting none of `left`: what a call spent here answers, aged.
    taken: Option<(Decision, u64)>,
    /// How many permits the next refill asks for.
    size: u64,
    /// When the last refill was sent, if it was allowed.
    last_refill_us: Option<u64>,
    /// A refill is in flight: a call that cannot spend waits for it.
    refilling: bool,
    /// Whose refill is in flight, and the permits it asks for that no
    /// waiting call counts on yet.
    flight: (PolicyId, u64),
    /// The cost of the calls that found no room in the refill in flight:
    /// the next refill asks for them too.
    missed: u64,
    /// When the last refill was sent.
    sent_us: u64,
    /// Refills come back (or abandoned) so far: tells a waiter whether an
    /// outcome is of the refill it waited for.
    refills: u64,
    /// The last refill's outcome when it took nothing, for its waiters.
    failed: Option<Failed>,
}

/// A refill that took nothing: a denial or a store failure.
#[derive(Debug)]
struct Failed {
    /// Its number in `refills`.
    refill: u64,
    policy: PolicyId,
    cost: u64,
    /// When it came back (µs, on the limiter's clock).
    at: u64,
    outcome: Result<Decision, Error>,
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
pub(crate) struct Held {
    pub(crate) left: u64,
    pub(crate) window_end_us: Option<u64>,
    pub(crate) from: Option<Limiter>,
    /// The refill that took them: what giving them back refunds.
    pub(crate) of: Option<Refunded>,
}

impl Held {
    /// Gives them back: refunded while they may still count in the store,
    /// else wasted (a fixed window that ended, a refund that failed).
    pub(crate) async fn let_go(self, key: &[u8], now: u64) -> LetGo {
        match self.from {
            Some(from) => let_go(&from, key, self.left, (self.window_end_us, self.of), now).await,
            None => LetGo { returned: 0, wasted: self.left },
        }
    }
}

/// One key's quota: its state, behind a lock no call holds across an
/// await (spending is a few loads and stores), and the wake-up of the
/// calls waiting for a refill.
#[derive(Debug, Default)]
pub(crate) struct Quota {
    state: std::sync::Mutex<LocalQuota>,
    refilled: tokio::sync::Notify,
}

/// Ends a refill however its call ends (a dropped future included): no
/// refill is in flight any more, and its waiters wake.
struct Refilling<'a> {
    quota: &'a Quota,
    /// The refills come back when this one was sent: it is the one in flight while they stay this many.
    refill: u64,
}

impl Drop for Refilling<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.quota.state();
            if state.refilling && state.refills == self.refill {
                // Abandoned: its waiters find nothing of it and make their own calls.
                state.refilling = false;
                state.refills += 1;
            }
        }
        self.quota.refilled.notify_waiters();
    }
}

/// A call counted in the room of the refill it waits for: dropped before
/// that refill comes back (the call was cancelled), it gives the room back.
struct Counted<'a> {
    quota: &'a Quota,
    cost: u64,
    /// The refills come back when the call began to wait.
    refill: u64,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        let mut state = self.quota.state();
        if state.refilling && state.refills == self.refill {
            state.flight.1 = state.flight.1.saturating_add(self.cost);
        }
    }
}

impl Quota {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, LocalQuota> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decides `limiter`'s call of `cost` (> 0) for `key`, taking up to
    /// `max` permits from the store when the local ones do not cover it.
    /// `ttl_us` bounds how long a bucket's or GCRA's permits stay here, and
    /// is how soon a refill must follow the last one for the next to grow.
    pub(crate) async fn decide(
        &self,
        limiter: &Limiter,
        key: &[u8],
        cost: u64,
        (max, ttl_us): (u64, u64),
        moved: &mut Moved,
    ) -> Result<Decision, Error> {
        let policy = policy_id(limiter);
        let waiting = {
            let mut state = self.state();
            let now = now_us(limiter);
            if let Some(spent) = state.spend(policy, cost, now, moved) {
                return Ok(spent);
            }
            match state.refilling {
                false => Ok(None),
                true => match state.flight {
                    (of, room) if of == policy && (room >= cost || state.denied(policy, cost, now)) => {
                        // Counted in its room if there is some; else waiting only to share a denial.
                        let counted = if room >= cost { cost } else { 0 };
                        state.flight.1 = room - counted;
                        if counted == 0 {
                            state.missed = state.missed.saturating_add(cost);
                        }
                        // Made under the lock the refill ends under: its wake-up cannot be missed.
                        Ok(Some((self.refilled.notified(), state.refills, counted)))
                    }
                    (of, _) => {
                        if of == policy {
                            state.missed = state.missed.saturating_add(cost);
                        }
                        Err(())
                    }
                },
            }
        };
        let Ok(waiting) = waiting else {
            return alone(limiter, key, cost, moved).await;
        };
        if let Some((refilled, seen, counted)) = waiting {
            let _room = Counted { quota: self, cost: counted, refill: seen };
            refilled.await;
            let mut state = self.state();
            let now = now_us(limiter);
            if let Some(spent) = state.spend(policy, cost, now, moved) {
                return Ok(spent);
            }
            if let Some(shared) = state.shared(policy, cost, seen, now) {
                return shared;
            }
        }
        // This call's own: a refill, unless another call sent one meanwhile.
        let now = now_us(limiter);
        let refill = {
            let mut state = self.state();
            if let Some(spent) = state.spend(policy, cost, now, moved) {
                return Ok(spent);
            }
            (!state.refilling).then(|| {
                let (held, size) = state.begin_refill(policy, cost, now, (max, ttl_us));
                (held, size, state.refills)
            })
        };
        let Some((held, size, refill)) = refill else {
            return alone(limiter, key, cost, moved).await;
        };
        let _refilling = Refilling { quota: self, refill };
        let taking = take(limiter, key, cost, cost.max(size));
        // Sent together: the give-back costs no round trip of its own.
        let (let_go, taken) = match held {
            Some(held) => tokio::join!(held.let_go(key, now), taking),
            None => (LetGo::default(), taking.await),
        };
        moved.let_go = let_go;
        let back = now_us(limiter);
        let mut state = self.state();
        state.refilling = false;
        state.refills += 1;
        let (decision, took) = match taken {
            Ok((decision, took)) if decision.allowed => (decision, took),
            outcome => {
                // Near the limit, or failing: ask for the call's own cost again, as without prefetch.
                state.last_refill_us = None;
                let outcome = outcome.map(|(decision, _)| decision);
                let refill = state.refills;
                state.failed = Some(Failed { refill, policy, cost, at: back, outcome: outcome.clone() });
                return outcome;
            }
        };
        let window_end_us = window_reset_us(limiter, &decision).map(|reset| now.saturating_add(reset));
        // Counted from when the refill was sent: the store judged it no
        // earlier, so its window ends no earlier than this.
        state.expires_us = now.saturating_add(window_end_us.map_or(ttl_us, |end| (end - now).min(ttl_us)));
        state.window_end_us = window_end_us;
        state.left = took - cost;
        state.last_refill_us = Some(now);
        state.taken = Some((decision, now));
        state.failed = None;
        if state.from.as_ref().is_none_or(|(_, of)| *of != policy) {
            state.from = Some((Limiter { prefetch: None, ..limiter.clone() }, policy));
        }
        *moved = Moved { prefetched: took, spent: cost, ..*moved };
        Ok(state.answer(now))
    }
}

impl LocalQuota {
    /// Spends `cost` of the local permits, if they are `policy`'s, cover it and have not expired.
    fn spend(&mut self, policy: PolicyId, cost: u64, now: u64, moved: &mut Moved) -> Option<Decision> {
        if self.left < cost || now >= self.expires_us || self.from.as_ref().is_none_or(|(_, of)| *of != policy) {
            return None;
        }
        self.left -= cost;
        moved.spent = cost;
        Some(self.answer(now))
    }

    /// Marks a refill in flight and works out its size; takes out the
    /// permits held (expired, or another policy's) to give back with it.
    fn begin_refill(
        &mut self,
        policy: PolicyId,
        cost: u64,
        now: u64,
        (max, ttl_us): (u64, u64),
    ) -> (Option<Held>, u64) {
        let same = self.from.as_ref().is_some_and(|(_, of)| *of == policy);
        // A key called less often than once per ttl takes only its own
        // cost, so it gets exactly the answers it gets without prefetch.
        self.size = match self.last_refill_us {
            Some(last) if same && now.saturating_sub(last) <= ttl_us => self.size.saturating_mul(2).clamp(1, max),
            _ => 1,
        };
        // Calls that went alone during the last refill come again with this one's.
        if now.saturating_sub(self.sent_us) <= ttl_us {
            self.size = self.size.max(std::mem::take(&mut self.missed)).min(max);
        }
        self.missed = 0;
        self.refilling = true;
        self.sent_us = now;
        self.flight = (policy, self.size.saturating_sub(cost));
        let held = self.take_held();
        (held, self.size)
    }

    /// Whether the last refill was a denial of `policy` for `cost` still in
    /// force at `now`: the key is at its limit, and a call may wait to share
    /// the next refill's denial.
    fn denied(&self, policy: PolicyId, cost: u64, now: u64) -> bool {
        let Some(Failed { policy: of, cost: denied, at, outcome: Ok(denial), .. }) = &self.failed else { return false };
        let until = denial.retry_after.map_or(u64::MAX, |retry| at.saturating_add(retry.as_micros() as u64));
        *of == policy && *denied == cost && now < until
    }

    /// What a waiter that found nothing to spend answers with, if the
    /// refill it waited for (any after `seen`) took nothing: that refill's
    /// failure, or its denial of the same policy and cost, aged, while its
    /// `retry_after` has not passed.
    fn shared(&self, policy: PolicyId, cost: u64, seen: u64, now: u64) -> Option<Result<Decision, Error>> {
        let failed = self.failed.as_ref().filter(|failed| failed.refill > seen)?;
        let denial = match &failed.outcome {
            Err(error) => return Some(Err(error.clone())),
            Ok(denial) if failed.policy == policy && failed.cost == cost => denial,
            Ok(_) => return None,
        };
        let elapsed = Duration::from_micros(now.saturating_sub(failed.at));
        if denial.retry_after.is_some_and(|retry| elapsed >= retry) {
            return None;
        }
        Some(Ok(aged(denial, elapsed, 0)))
    }

    /// Forgets the local permits, the key having been reset through
    /// `reset_by`; how many. `None` when they count in another state (of
    /// another algorithm, or a trial's beside the enforced policy's), which
    /// the reset left as it was: they stay.
    pub(crate) fn forget(&mut self, reset_by: &Limiter) -> Option<u64> {
        let trial = |limiter: &Limiter| limiter.dry_run || limiter.rule.policy.is_dry_run();
        let same = |from: &Limiter| {
            from.rule.policy.algorithm() == reset_by.rule.policy.algorithm() && trial(from) == trial(reset_by)
        };
        if self.left > 0 && self.from.as_ref().is_some_and(|(from, _)| !same(from)) {
            return None;
        }
        self.last_refill_us = None;
        Some(std::mem::take(&mut self.left))
    }

    /// Whether this quota may be dropped at `now`: no refill in flight, no
    /// permits that may still be spent (expired ones are given back as it
    /// is dropped), and, unless `pressed` for room, no recent refill to
    /// grow from.
    pub(crate) fn idle(&self, now: u64, ttl_us: u64, pressed: bool) -> bool {
        let unspendable = self.left == 0 || now >= self.expires_us;
        let cold = pressed || self.last_refill_us.is_none_or(|last| now.saturating_sub(last) > ttl_us);
        !self.refilling && unspendable && cold
    }

    /// The permits still held, taken out to give back.
    pub(crate) fn take_held(&mut self) -> Option<Held> {
        let left = std::mem::take(&mut self.left);
        let from = self.from.as_ref().map(|(from, _)| from.clone());
        let of = self.taken.as_ref().map(|(decision, _)| Refunded::of(decision));
        (left > 0).then_some(Held { left, window_end_us: self.window_end_us, from, of })
    }

    /// The answer of a call that leaves `self.left` here: the refill's
    /// decision aged to `now`, its `remaining` counting the local permits.
    fn answer(&self, now: u64) -> Decision {
        let Some((decision, at)) = &self.taken else {
            // Unreachable: permits are only spent after a refill recorded its answer.
            return crate::on_error::unsettled(true, self.left, std::time::SystemTime::now());
        };
        aged(decision, Duration::from_micros(now.saturating_sub(*at)), self.left)
    }
}

/// A call decided by the store alone, as without prefetch: counted as a
/// refill of its own cost, spent at once.
pub(crate) async fn alone(limiter: &Limiter, key: &[u8], cost: u64, moved: &mut Moved) -> Result<Decision, Error> {
    let result = limiter.run(key, cost, CallKind::Check).await;
    if result.as_ref().is_ok_and(|decision| decision.allowed) {
        *moved = Moved { prefetched: cost, spent: cost, ..*moved };
    }
    result
}

/// `decision` as it reads `elapsed` later, with `more` permits remaining.
fn aged(decision: &Decision, elapsed: Duration, more: u64) -> Decision {
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
