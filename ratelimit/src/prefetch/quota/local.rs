//! The state of one key's local quota behind its lock: the refill in
//! flight and the calls counting on it, the last refill that took nothing,
//! and the permits held ([`Slot`], which calls spend without this lock,
//! replaced or emptied only under it). Every method is a few loads and
//! stores under that lock; `mod.rs` makes the calls to the store around them.

use super::held::{aged, Held};
use super::{Moved, PolicyId, Unspent};
use crate::decision::Decision;
use crate::error::Error;
use crate::Limiter;
use arc_swap::ArcSwapOption;
use std::sync::Arc;
use std::time::Duration;

/// The permits a key holds here, if a refill took some.
pub(crate) type Slot = ArcSwapOption<Held>;

/// How one key's permits are refilled here, and how much it takes next.
#[derive(Debug, Default)]
pub(crate) struct LocalQuota {
    /// The limiter (without prefetch) whose policy took the permits held:
    /// they are given back through it.
    from: Option<(Limiter, PolicyId)>,
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
    failed: Option<RefillFailed>,
}

/// A refill that took nothing: a denial or a store failure.
#[derive(Debug)]
struct RefillFailed {
    /// Its number in `refills`.
    refill: u64,
    policy: PolicyId,
    cost: u64,
    /// When it came back (µs, on the limiter's clock).
    at: u64,
    outcome: Result<Decision, Error>,
}

/// What a call that cannot spend does while a refill may be in flight.
pub(crate) enum Arrival {
    /// No refill in flight: this call sends one.
    Refill,
    /// Waits for the refill in flight (the refills come back so far), counted
    /// in its room for `cost` (0: it waits only to share a denial).
    Wait { seen: u64, cost: u64 },
    /// The refill in flight has no room for it: to the store alone.
    Alone,
}

/// A refill that came back, for [`LocalQuota::settle`].
pub(crate) struct Refilled {
    pub(crate) policy: PolicyId,
    pub(crate) cost: u64,
    /// When it was sent and when it came back (µs).
    pub(crate) sent: u64,
    pub(crate) back: u64,
    pub(crate) ttl_us: u64,
    /// Until the fixed window it took from ends (µs after `sent`), if one.
    pub(crate) window_reset_us: Option<u64>,
}

impl LocalQuota {
    /// What a call of `policy` for `cost` that could not spend does now.
    pub(crate) fn arrive(&mut self, policy: PolicyId, cost: u64, now: u64) -> Arrival {
        if !self.refilling {
            return Arrival::Refill;
        }
        let (of, room) = self.flight;
        if of != policy {
            return Arrival::Alone;
        }
        if room >= cost {
            self.flight.1 = room - cost;
            return Arrival::Wait { seen: self.refills, cost };
        }
        self.missed = self.missed.saturating_add(cost);
        match self.denied(policy, cost, now) {
            true => Arrival::Wait { seen: self.refills, cost: 0 },
            false => Arrival::Alone,
        }
    }

    pub(crate) fn is_refilling(&self) -> bool {
        self.refilling
    }

    /// Gives back the room a waiter counted on, if its refill (after `seen`) is still in flight.
    pub(crate) fn leave(&mut self, seen: u64, cost: u64) {
        if self.refilling && self.refills == seen {
            self.flight.1 = self.flight.1.saturating_add(cost);
        }
    }

    /// Ends the refill sent after `seen` refills if it is still in flight
    /// (its call was dropped): its waiters find nothing of it.
    pub(crate) fn abandon(&mut self, seen: u64) {
        if self.refilling && self.refills == seen {
            self.refilling = false;
            self.refills += 1;
        }
    }

    /// Marks a refill in flight and works out its size; takes out the
    /// permits held in `slot` (expired, or another policy's) to give back
    /// with it. Returns them, the size, and the refills come back before it.
    pub(crate) fn begin_refill(
        &mut self,
        policy: PolicyId,
        cost: u64,
        now: u64,
        (max, ttl_us): (u64, u64),
        slot: &Slot,
    ) -> (Option<Unspent>, u64, u64) {
        let same = self.from.as_ref().is_some_and(|(_, of)| *of == policy);
        // A key called less often than once per ttl takes only its own
        // cost, so it gets exactly the answers it gets without prefetch.
        self.size = match self.last_refill_us {
            Some(last) if same && now.saturating_sub(last) <= ttl_us => self.size.saturating_mul(2).clamp(1, max),
            _ => 1,
        };
        // Calls that went alone during the last refill come again with this one's.
        if now.saturating_sub(self.sent_us) <= ttl_us {
            self.size = self.size.max(self.missed).min(max);
        }
        self.missed = 0;
        self.refilling = true;
        self.sent_us = now;
        self.flight = (policy, self.size.saturating_sub(cost));
        (self.take_held(slot), self.size, self.refills)
    }

    /// Records what a refill took (`took` of `limiter`'s permits, `cost`
    /// of them this call's, the rest held in `slot`) or its denial or
    /// failure, and answers its call.
    pub(crate) fn settle(
        &mut self,
        limiter: &Limiter,
        (refill, taken): (Refilled, Result<(Decision, u64), Error>),
        moved: &mut Moved,
        slot: &Slot,
    ) -> Result<Decision, Error> {
        let Refilled { policy, cost, sent, back, ttl_us, window_reset_us } = refill;
        self.refilling = false;
        self.refills += 1;
        let (decision, took) = match taken {
            Ok((decision, took)) if decision.allowed => (decision, took),
            outcome => {
                // Near the limit, or failing: ask for the call's own cost again, as without prefetch.
                self.last_refill_us = None;
                let outcome = outcome.map(|(decision, _)| decision);
                let refill = self.refills;
                self.failed = Some(RefillFailed { refill, policy, cost, at: back, outcome: outcome.clone() });
                return outcome;
            }
        };
        // Counted from when the refill was sent: the store judged it no
        // earlier, so its window ends no earlier than this.
        let window_end_us = window_reset_us.map(|reset| sent.saturating_add(reset));
        let expires_us = sent.saturating_add(window_reset_us.map_or(ttl_us, |reset| reset.min(ttl_us)));
        self.last_refill_us = Some(sent);
        self.failed = None;
        if self.from.as_ref().is_none_or(|(_, of)| *of != policy) {
            self.from = Some((Limiter { prefetch: None, ..limiter.clone() }, policy));
        }
        *moved = Moved { prefetched: took, spent: cost, ..*moved };
        let left = took - cost;
        let held = Held::new(left, policy, (expires_us, window_end_us), decision, sent);
        // Answered before the permits are shown to the calls that spend them.
        let answer = held.answer(sent, left);
        // The permits held before were taken out when this refill began.
        slot.store(Some(Arc::new(held)));
        Ok(answer)
    }

    /// Whether the last refill was a denial of `policy` for `cost` still in
    /// force at `now`: the key is at its limit, and a call may wait to share
    /// the next refill's denial.
    fn denied(&self, policy: PolicyId, cost: u64, now: u64) -> bool {
        let Some(RefillFailed { policy: of, cost: denied, at, outcome: Ok(denial), .. }) = &self.failed else {
            return false;
        };
        let until = denial.retry_after.map_or(u64::MAX, |retry| at.saturating_add(retry.as_micros() as u64));
        *of == policy && *denied == cost && now < until
    }

    /// What a waiter that found nothing to spend answers with, if the
    /// refill it waited for (any after `seen`) took nothing: that refill's
    /// failure, or its denial of the same policy and cost, aged, while its
    /// `retry_after` has not passed.
    pub(crate) fn shared(&self, policy: PolicyId, cost: u64, seen: u64, now: u64) -> Option<Result<Decision, Error>> {
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
    pub(crate) fn forget(&mut self, reset_by: &Limiter, slot: &Slot) -> Option<u64> {
        let trial = |limiter: &Limiter| limiter.enforcement.dry_run || limiter.rule.policy.is_dry_run();
        let same = |from: &Limiter| {
            from.rule.policy.algorithm() == reset_by.rule.policy.algorithm() && trial(from) == trial(reset_by)
        };
        let held = slot.load();
        let left = held.as_ref().map_or(0, |held| held.left());
        if left > 0 && self.from.as_ref().is_some_and(|(from, _)| !same(from)) {
            return None;
        }
        self.last_refill_us = None;
        Some(held.as_ref().map_or(0, |held| held.take()))
    }

    /// Whether this quota may be dropped at `now`: no refill in flight, no
    /// permits that may still be spent (expired ones are given back as it
    /// is dropped), and, unless `pressed` for room, no recent refill to
    /// grow from.
    pub(crate) fn idle(&self, now: u64, ttl_us: u64, pressed: bool, slot: &Slot) -> bool {
        let unspendable = slot.load().as_ref().is_none_or(|held| held.left() == 0 || now >= held.expires_us);
        let cold = pressed || self.last_refill_us.is_none_or(|last| now.saturating_sub(last) > ttl_us);
        !self.refilling && unspendable && cold
    }

    /// The permits still held in `slot`, taken out to give back: no call can spend them after.
    pub(crate) fn take_held(&mut self, slot: &Slot) -> Option<Unspent> {
        let held = slot.load();
        let held = held.as_ref()?;
        let left = held.take();
        let from = self.from.as_ref().map(|(from, _)| from.clone());
        (left > 0).then(|| Unspent { left, window_end_us: held.window_end_us, from, of: Some(held.refunded()) })
    }
}
