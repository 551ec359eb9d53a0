//! [`MemoryBackend`]: the in-process store, sharded, with idle keys dropped.

use super::{Backend, BoxFuture, Outcome, Request, CLIENT_CLOCK_SLACK_US};
use crate::algo::{self, State};
use crate::clock::system_now_us;
use crate::Error;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 64;
/// How often (in the clock's time) a shard is swept of keys whose state has
/// returned to untouched.
const SWEEP_EVERY_US: u64 = 1_000_000;

/// The in-process store: decides exactly as the Redis scripts do.
///
/// Keys live in 64 independently locked shards, so concurrent callers rarely
/// contend. A key is dropped as soon as its state is back to untouched
/// (`reset_after` has passed): lazily when it is next seen, and by a sweep of
/// its shard at most once a second, so memory stays bounded by the keys that
/// are actually limited right now.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ratelimit::Error> {
/// use ratelimit::{Clock, Limiter, ManualClock, MemoryBackend, Policy, Store};
/// use std::{sync::Arc, time::Duration};
///
/// let memory = Arc::new(MemoryBackend::new());
/// let clock = ManualClock::new();
/// let store = Store::from_backend(memory.clone()).with_clock(clock.clone());
/// let limiter = Limiter::new("docs", Policy::fixed_window("1/1s")?, &store);
/// for user in 0..100 {
///     limiter.check(format!("user-{user}"), 1).await?;
/// }
/// assert_eq!(memory.len(), 100);
/// clock.advance(Duration::from_secs(61));
/// memory.purge_expired(clock.now_us().unwrap());
/// assert_eq!(memory.len(), 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MemoryBackend {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
}

#[derive(Debug, Default)]
struct Shard {
    entries: HashMap<Box<[u8]>, Entry>,
    next_sweep_us: u64,
}

#[derive(Debug)]
struct Entry {
    state: State,
    expires_at_us: u64,
}

impl Shard {
    fn sweep(&mut self, now: u64) {
        self.entries.retain(|_, e| e.expires_at_us > now);
        self.next_sweep_us = now.saturating_add(SWEEP_EVERY_US);
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        MemoryBackend { shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(), hasher: RandomState::new() }
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        // A panic while holding a shard cannot leave a half-written entry
        // (entries are replaced whole), so a poisoned lock is safe to reuse.
        self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decides synchronously: the memory backend never waits.
    pub fn decide_now(&self, request: &Request<'_>) -> Outcome {
        let now = request.now_us.unwrap_or_else(system_now_us);
        let mut shard = self.shard(request.key);
        if now >= shard.next_sweep_us {
            shard.sweep(now);
        }
        // Take the entry out (keeping its key allocation) rather than cloning
        // its state: a sliding log may hold many entries.
        let (stored_key, mut state, expires_at_us) = match shard.entries.remove_entry(request.key) {
            Some((stored_key, e)) if e.expires_at_us > now => (Some(stored_key), Some(e.state), e.expires_at_us),
            Some((stored_key, _)) => (Some(stored_key), None, 0),
            None => (None, None, 0),
        };
        let outcome = algo::decide(&request.policy.params, &mut state, now, request.cost, request.peek);
        // As on Redis, only a write moves the expiry; other calls leave the entry as it was.
        let wrote = outcome.allowed && request.cost > 0 && !request.peek;
        let slack = if request.now_us.is_some() { CLIENT_CLOCK_SLACK_US } else { 0 };
        let expires_at_us = if wrote { now + outcome.reset_after_us + slack } else { expires_at_us };
        if let Some(state) = state {
            let key = stored_key.unwrap_or_else(|| request.key.into());
            shard.entries.insert(key, Entry { state, expires_at_us });
        }
        outcome
    }

    /// Number of keys held (including ones that expired but were not swept yet).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).entries.len()).sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key whose state is back to untouched at `now_us`.
    pub fn purge_expired(&self, now_us: u64) {
        for shard in self.shards.iter() {
            shard.lock().unwrap_or_else(|p| p.into_inner()).sweep(now_us);
        }
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl Backend for MemoryBackend {
    fn decide<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Outcome, Error>> {
        let outcome = self.decide_now(&request);
        Box::pin(async move { Ok(outcome) })
    }

    fn reset<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        self.shard(key).entries.remove(key);
        Box::pin(async { Ok(()) })
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}
