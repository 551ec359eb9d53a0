//! The deny cache: a limiter's in-process memory of the denials its store
//! gave, so a client that keeps calling while denied costs no round trip.
//!
//! A denial with a `retry_after` is remembered for its key and cost until the
//! time the store named; until then a check of the same key and cost is
//! answered here with that decision, its `retry_after` and `reset_after`
//! counted down. The cache only ever denies, and only until the store's own
//! time, so it can never admit more than the policy allows: at worst it
//! denies a call the store would now admit because something else changed
//! the key (a `reset` through another limiter or process, or a policy change).
//!
//! A denial is also remembered with the store's data epoch
//! ([`Bound::data_epoch`](crate::backend::Bound::data_epoch)) when its call
//! began: once the store finds its data may be gone (a Redis server
//! restarted or flushed), the denials remembered before are not served.
//!
//! Times are the limiter's clock when it has one (a manual clock in tests,
//! the system clock), else (the store's own clock) this process's monotonic
//! clock read before the store was asked, so a remembered denial never
//! outlasts the one the store gave. The limiter reads that time once per call
//! and passes it in.

use crate::backend::memory::sharded::{Expires, MapKey, Namespace, Sharded};
use crate::decision::Decision;
use crate::key::MAX_RAW_KEY_LEN;
use std::time::Duration;

const SHARDS: usize = 16;
/// At most this many keys per shard (65 536 per limiter): past it, new
/// denials are simply not remembered until expired ones are swept.
const PER_SHARD: usize = 4096;
#[cfg(test)]
const SWEEP_EVERY_US: u64 = 1_000_000;

/// One limiter's remembered denials, by user key.
#[derive(Debug)]
pub(crate) struct DenyCache {
    denials: Sharded<Denial>,
    /// Keys are the user's alone: one limiter's.
    unscoped: Namespace,
}

#[derive(Debug)]
struct Denial {
    cost: u64,
    /// The policy the store decided by ([`Policy::fingerprint`](crate::Policy)).
    policy: u64,
    /// The store's data epoch when the call began.
    epoch: u64,
    /// When the store decided (the cache's time).
    at: u64,
    /// When the same call may pass: `at + retry_after`.
    until: u64,
    /// When the key is untouched again: `at + reset_after`.
    reset_at: u64,
    decision: Decision,
}

impl Expires for Denial {
    fn expires_at_us(&self) -> u64 {
        self.until
    }
}

impl DenyCache {
    pub(crate) fn new() -> Self {
        let denials = Sharded::new(SHARDS);
        let unscoped = denials.scope(b"");
        DenyCache { denials, unscoped }
    }

    /// The remembered denial of `key` at `cost` under `policy` (its
    /// fingerprint, asked only when a denial is held) and the store's data
    /// `epoch`, as it stands at `now`.
    pub(crate) fn get(
        &self,
        key: &[u8],
        cost: u64,
        policy: impl FnOnce() -> u64,
        epoch: u64,
        now: u64,
    ) -> Option<Decision> {
        // A limiter that denies nothing pays one load, not a lock.
        if self.denials.len() == 0 {
            return None;
        }
        let mut found = self.denials.entry(MapKey { scope: &self.unscoped, key }, now);
        let entry = found.get_mut()?;
        // Past its time, or the store's data it repeated may be gone.
        if now >= entry.until || entry.epoch != epoch {
            found.remove();
            return None;
        }
        // Another cost or policy, or a clock that stepped back before the denial: let the store decide.
        if entry.cost != cost || now < entry.at || entry.policy != policy() {
            return None;
        }
        let mut decision = entry.decision.clone();
        let elapsed = Duration::from_micros(now - entry.at);
        decision.retry_after = Some(Duration::from_micros(entry.until - now));
        decision.reset_after = Duration::from_micros(entry.reset_at.saturating_sub(now));
        decision.decided_at += elapsed;
        if !decision.quotas.is_empty() {
            still_violated(&mut decision, elapsed);
        }
        Some(decision)
    }

    /// Remembers `decision`, made by the store at `at` for `key` and `cost`
    /// under `policy` and data epoch (`(policy, epoch)`), if it is a denial
    /// that names a time to retry.
    pub(crate) fn remember(&self, key: &[u8], cost: u64, (policy, epoch): (u64, u64), at: u64, decision: &Decision) {
        let Some(retry_after) = decision.retry_after else { return };
        if decision.allowed || cost == 0 || retry_after.is_zero() || key.len() > MAX_RAW_KEY_LEN {
            return;
        }
        let mut slot = self.denials.entry(MapKey { scope: &self.unscoped, key }, at);
        // A flood of new keys against a full shard costs no scans: their
        // denials are just not remembered until the next sweep.
        if slot.shard_len() >= PER_SHARD && slot.get_mut().is_none() {
            return;
        }
        slot.insert(Denial {
            cost,
            policy,
            epoch,
            at,
            until: at.saturating_add(retry_after.as_micros() as u64),
            reset_at: at.saturating_add(decision.reset_after.as_micros() as u64),
            decision: decision.clone(),
        });
    }

    /// Forgets every denial of `key` (after a reset, or after a call of
    /// another cost was admitted and changed the key's state).
    pub(crate) fn forget(&self, key: &[u8]) {
        if self.denials.len() != 0 {
            self.denials.remove(MapKey { scope: &self.unscoped, key });
        }
    }

    /// Keys held (including expired ones not swept yet).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.denials.len()
    }
}

/// Counts a remembered denial of several strategies down by `elapsed`: a
/// strategy whose own retry time has passed no longer fails the call, so it
/// leaves `violated`, and `limit`/`remaining` are again the least room among
/// those that still fail (the strategy that named the denial's retry time
/// fails until the entry expires, so one always does).
fn still_violated(decision: &mut Decision, elapsed: Duration) {
    for quota in &mut decision.quotas {
        quota.reset_after = quota.reset_after.saturating_sub(elapsed);
        quota.retry_after = quota.retry_after.and_then(|r| r.checked_sub(elapsed)).filter(|r| !r.is_zero());
        if quota.reset_after.is_zero() {
            quota.remaining = quota.strategy.limit;
        }
    }
    let failing = || decision.quotas.iter().filter(|q| q.retry_after.is_some());
    if let Some(least) = failing().reduce(|best, q| if q.remaining < best.remaining { q } else { best }) {
        (decision.limit, decision.remaining) = (least.strategy.limit, least.remaining);
    }
    decision.violated = failing().map(|q| q.strategy).collect();
}

#[cfg(test)]
mod tests {
    use crate::limiter::deny_cache::*;

    fn denial(retry_us: u64, reset_us: u64) -> Decision {
        Decision {
            allowed: false,
            limit: 3,
            remaining: 0,
            reset_after: Duration::from_micros(reset_us),
            retry_after: Some(Duration::from_micros(retry_us)),
            violated: Vec::new(),
            decided_at: std::time::UNIX_EPOCH,
            quotas: Vec::new(),
        }
    }

    #[test]
    fn a_denial_is_served_until_its_retry_time_then_forgotten() {
        let cache = DenyCache::new();
        cache.remember(b"k", 1, (0, 0), 1_000, &denial(500, 800));
        let later = cache.get(b"k", 1, || 0, 0, 1_200).expect("remembered");
        assert_eq!(
            (later.retry_after, later.reset_after),
            (Some(Duration::from_micros(300)), Duration::from_micros(600))
        );
        assert!(cache.get(b"k", 1, || 0, 0, 1_499).is_some());
        assert!(cache.get(b"k", 1, || 0, 0, 1_500).is_none(), "served at the time the store said it passes");
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn only_the_same_cost_at_or_after_the_denial_is_served() {
        let cache = DenyCache::new();
        cache.remember(b"k", 5, (0, 0), 1_000, &denial(500, 500));
        assert!(cache.get(b"k", 1, || 0, 0, 1_100).is_none(), "a denial of 5 says nothing about 1");
        assert!(cache.get(b"k", 6, || 0, 0, 1_100).is_none(), "nor about 6 (a later retry, or never)");
        assert!(cache.get(b"k", 5, || 0, 0, 999).is_none(), "a clock that stepped back asks the store");
        assert!(cache.get(b"other", 5, || 0, 0, 1_100).is_none());
        assert!(cache.get(b"k", 5, || 1, 0, 1_100).is_none(), "nor under another policy");
    }

    #[test]
    fn admissions_denials_without_retry_cost_zero_and_long_keys_are_not_remembered() {
        let cache = DenyCache::new();
        let mut allowed = denial(0, 10);
        allowed.allowed = true;
        allowed.retry_after = None;
        cache.remember(b"a", 1, (0, 0), 0, &allowed);
        let mut never = denial(0, 10);
        never.retry_after = None;
        cache.remember(b"n", 9, (0, 0), 0, &never);
        cache.remember(b"z", 0, (0, 0), 0, &denial(10, 10));
        cache.remember(&[b'x'; MAX_RAW_KEY_LEN + 1], 1, (0, 0), 0, &denial(10, 10));
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_denial_remembered_before_the_stores_data_went_is_not_served() {
        let cache = DenyCache::new();
        cache.remember(b"k", 1, (0, 3), 1_000, &denial(500, 500));
        assert!(cache.get(b"k", 1, || 0, 3, 1_100).is_some());
        assert!(cache.get(b"k", 1, || 0, 4, 1_100).is_none(), "the store restarted or was flushed since");
        assert_eq!(cache.len(), 0, "and it is dropped");
    }

    #[test]
    fn forget_drops_a_key() {
        let cache = DenyCache::new();
        cache.remember(b"k", 1, (0, 0), 0, &denial(10, 10));
        cache.forget(b"other");
        assert_eq!(cache.len(), 1);
        cache.forget(b"k");
        assert!(cache.get(b"k", 1, || 0, 0, 1).is_none());
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn memory_is_bounded_and_expired_denials_make_room() {
        let cache = DenyCache::new();
        for i in 0..(SHARDS * PER_SHARD * 2) as u64 {
            cache.remember(&i.to_be_bytes(), 1, (0, 0), 0, &denial(1_000, 1_000));
        }
        assert!(cache.len() <= SHARDS * PER_SHARD, "{}", cache.len());
        // Once they expired and their shard was swept, new denials take their place.
        let later = SWEEP_EVERY_US;
        for i in 0..1000u64 {
            cache.remember(&(u64::MAX - i).to_be_bytes(), 1, (0, 0), later, &denial(1_000, 1_000));
        }
        assert!(cache.get(&u64::MAX.to_be_bytes(), 1, || 0, 0, later + 1).is_some());
        assert!(cache.len() <= SHARDS * PER_SHARD);
    }
}
