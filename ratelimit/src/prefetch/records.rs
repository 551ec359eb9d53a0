//! A prefetch's records: one per key it holds a local quota for, whatever
//! policy decides the key, at most [`MAX_RECORDS`] together; the idle ones
//! swept as new keys come, and what is still held given back when a record
//! or the whole prefetch is dropped.

use super::{Prefetch, PrefetchStats, PREFETCHED, RETURNED, SPENT, WASTED};
use crate::decision::Decision;
use crate::prefetch::quota::{now_us, KeyQuota, LetGo, Moved, PolicyId, Unspent};
use crate::{observe, Limiter};
use metrics::Counter;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

/// Past this many records, a new key first drops the idle ones.
pub(super) const SWEEP_ABOVE: usize = 1024;

/// At most this many records (keys with a local quota) per prefetch, its
/// limiters and policies together: at it, a new key is decided without
/// prefetch until records go idle and a sweep (at most one per TTL) drops them.
pub(crate) const MAX_RECORDS: usize = 4096;

/// One record per key, whatever policy decides it, so the burst bound
/// holds per key; by limiter (a site's calls in two `redlimit::scope`s are
/// two limiters, on two stores: the address of what the limiter's clones
/// share, kept alive by a record holding permits), then key.
#[derive(Debug)]
pub(super) struct Records {
    by_limiter: HashMap<usize, HashMap<Box<[u8]>, Arc<KeyQuota>>>,
    len: usize,
    /// Twice what the last sweep kept: a new key sweeps again on reaching it.
    sweep_at: usize,
    /// When the last sweep ran (µs).
    swept_us: Option<u64>,
}

/// Permits counted: prefetched, spent, returned, wasted; and their metrics.
#[derive(Debug)]
pub(super) struct Tally {
    pub(super) counts: [AtomicU64; 4],
    metrics: [Counter; 4],
}

impl Tally {
    pub(super) fn add(&self, moved: Moved) {
        let Moved { prefetched, spent, let_go: LetGo { returned, wasted } } = moved;
        for (i, n) in [(PREFETCHED, prefetched), (SPENT, spent), (RETURNED, returned), (WASTED, wasted)] {
            if n > 0 {
                self.counts[i].fetch_add(n, Ordering::Relaxed);
                self.metrics[i].increment(n);
            }
        }
    }
}

fn owner(limiter: &Limiter) -> usize {
    Arc::as_ptr(&limiter.inner) as usize
}

impl Prefetch {
    pub(super) fn tally(&self, limiter: &Limiter) -> &Arc<Tally> {
        self.tally.get_or_init(|| {
            let counts = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
            Arc::new(Tally { counts, metrics: observe::prefetch_counters(&limiter.inner.name) })
        })
    }

    /// Spends `cost` of the permits `key` holds under `limiter`, if it
    /// holds enough of `policy`'s, unexpired at `now`. The records are only
    /// read: calls of a hot key wait on no lock of each other's here.
    pub(super) fn spend(
        &self,
        (limiter, key): (&Limiter, &[u8]),
        (policy, cost): (PolicyId, u64),
        now: u64,
        moved: &mut Moved,
    ) -> Option<Decision> {
        let quotas = self.quotas.read().unwrap_or_else(PoisonError::into_inner);
        let quota = quotas.as_ref()?.by_limiter.get(&owner(limiter))?.get(key)?;
        quota.spend(policy, cost, now, moved)
    }

    /// The quota of `key` under `limiter`, made if new; `None` when every
    /// record is taken and none is idle (the call goes without prefetch).
    pub(super) fn quota(&self, limiter: &Limiter, key: &[u8]) -> Option<Arc<KeyQuota>> {
        let owner = owner(limiter);
        {
            let quotas = self.quotas.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(quota) = quotas.as_ref().and_then(|records| records.by_limiter.get(&owner)?.get(key)) {
                return Some(quota.clone());
            }
        }
        let mut quotas = self.quotas.write().unwrap_or_else(PoisonError::into_inner);
        let records = quotas.get_or_insert_with(|| Records {
            by_limiter: HashMap::new(),
            len: 0,
            sweep_at: SWEEP_ABOVE,
            swept_us: None,
        });
        // Made by another call since the look above?
        if let Some(quota) = records.by_limiter.get(&owner).and_then(|by_key| by_key.get(key)) {
            return Some(quota.clone());
        }
        if records.len >= SWEEP_ABOVE {
            // Past a TTL since the last sweep, or twice what it kept (below
            // the bound): at most one scan per TTL and O(1) per new key.
            let now = now_us(limiter);
            let stale = records.swept_us.is_none_or(|swept| now.saturating_sub(swept) > self.ttl_us);
            let full = records.len >= MAX_RECORDS;
            if stale || (!full && records.len >= records.sweep_at) {
                self.sweep(limiter, records, now, full);
            }
            if records.len >= MAX_RECORDS {
                return None;
            }
        }
        let quota = Arc::new(KeyQuota::default());
        records.by_limiter.entry(owner).or_default().insert(key.into(), quota.clone());
        records.len += 1;
        Some(quota)
    }

    /// Drops the idle records (all that hold nothing spendable when `full`),
    /// giving back the expired permits they hold on a task of their own.
    fn sweep(&self, limiter: &Limiter, records: &mut Records, now: u64, full: bool) {
        let ttl_us = self.ttl_us;
        let tally = self.tally(limiter);
        for by_key in records.by_limiter.values_mut() {
            by_key.retain(|key, quota| {
                // Another handle is a call under way: the record is in use.
                if Arc::strong_count(quota) > 1 {
                    return true;
                }
                if !quota.idle(now, ttl_us, full) {
                    return true;
                }
                if let Some(held) = quota.take_held() {
                    give_back_later(key.clone(), held, now, tally.clone());
                }
                false
            });
        }
        records.by_limiter.retain(|_, by_key| !by_key.is_empty());
        for by_key in records.by_limiter.values_mut() {
            // Mostly empty after a burst: give the table's memory back too.
            if by_key.capacity() > 4 * by_key.len().max(16) {
                by_key.shrink_to_fit();
            }
        }
        records.len = records.by_limiter.values().map(HashMap::len).sum();
        records.sweep_at = records.len.saturating_mul(2).clamp(SWEEP_ABOVE, MAX_RECORDS);
        records.swept_us = Some(now);
    }

    /// Forgets `key`'s local permits under `limiter` (it was reset in the
    /// store), unless they count in another state than the one reset.
    pub(crate) fn forget(&self, limiter: &Limiter, key: &[u8]) {
        let mut quotas = self.quotas.write().unwrap_or_else(PoisonError::into_inner);
        let Some(records) = quotas.as_mut() else { return };
        let Some(by_key) = records.by_limiter.get_mut(&owner(limiter)) else { return };
        let Some(returned) = by_key.get(key).and_then(|quota| quota.forget(limiter)) else { return };
        // A refill under way completes into the removed quota: dropped with it.
        by_key.remove(key);
        records.len -= 1;
        self.tally(limiter).add(Moved { let_go: LetGo { returned, wasted: 0 }, ..Moved::default() });
    }

    /// How many records this prefetch keeps.
    #[cfg(test)]
    pub(crate) fn records(&self) -> usize {
        self.quotas.read().unwrap_or_else(PoisonError::into_inner).as_ref().map_or(0, |records| records.len)
    }

    pub(super) fn stats(&self) -> PrefetchStats {
        let Some(tally) = self.tally.get() else { return PrefetchStats::default() };
        let [prefetched, spent, returned, wasted] = tally.counts.each_ref().map(|n| n.load(Ordering::Relaxed));
        PrefetchStats { prefetched, spent, returned, wasted }
    }
}

/// Gives `held` back on the current runtime, counted in `tally`; wasted without one.
fn give_back_later(key: Box<[u8]>, held: Unspent, now: u64, tally: Arc<Tally>) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move {
            let let_go = held.let_go(&key, now).await;
            tally.add(Moved { let_go, ..Moved::default() });
        })),
        Err(_) => tally.add(Moved { let_go: LetGo { returned: 0, wasted: held.left }, ..Moved::default() }),
    }
}

impl Drop for Prefetch {
    /// Gives back the permits still held, on the current runtime if there
    /// is one; they are wasted without one.
    fn drop(&mut self) {
        let records = self.quotas.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        let Some(tally) = self.tally.get() else { return };
        for (key, quota) in records.into_iter().flat_map(|records| records.by_limiter.into_values()).flatten() {
            if let Some(held) = quota.take_held() {
                let now = held.from.as_ref().map_or_else(crate::clock::process_now_us, now_us);
                give_back_later(key, held, now, tally.clone());
            }
        }
    }
}
