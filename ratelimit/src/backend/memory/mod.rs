//! [`MemoryBackend`]: the in-process store, with idle keys dropped. Users
//! reach it through [`Store::memory`](crate::Store::memory).
//!
//! The folder holds the store's own machinery: its map of expiring keys over
//! locked shards (`sharded.rs`, which each limiter's deny cache uses too),
//! the map's keyed hash (`key_hash.rs`), and the background sweeper
//! (`sweeper.rs`).

mod key_hash;
pub(crate) mod sharded;
mod sweeper;

use super::{Answer, Backend, Binding, Bound, BoxFuture, Call, CallKind, Outcome, CLIENT_CLOCK_SLACK_US};
use crate::algo::{self, State};
use crate::backend::memory::sharded::{Expires, MapKey, Namespace, Sharded};
use crate::backend::memory::sweeper::Sweep;
use crate::clock::{process_now_us, Clock};
use crate::error::Error;
use crate::policy::Policy;
use std::sync::Arc;

/// Independently locked shards: concurrent callers rarely contend.
const SHARDS: usize = 64;

/// The in-process store: decides exactly as the Redis scripts do.
///
/// Each limiter binds its key prefix (limiters with the same name and
/// algorithm share keys, as on Redis); a call hashes that prefix and the
/// user's key, never joined. A key is dropped as soon as its state is back
/// to untouched (`reset_after` has passed): lazily when it is next seen, by
/// a sweep of its shard at most once a second, whoever's call reaches it,
/// and, for keys timed by the store's own clock (the default), by a
/// background thread once a second even when no call comes. So memory stays
/// bounded by the keys that are actually limited now, and a burst's memory
/// is given back once it expired. Keys timed by a [`Clock`] of
/// the caller's (a manual clock, [`SystemClock`](crate::SystemClock)) follow
/// that clock, so only calls and [`purge_expired`](Self::purge_expired) sweep them.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::Error> {
/// use redlimit::__private::MemoryBackend;
/// use redlimit::{Clock, Limiter, ManualClock, Policy, Store};
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
    keys: Arc<Sharded<Stored>>,
}

#[derive(Debug)]
struct Stored {
    /// `None` only while a decision runs on an expired entry.
    state: Option<State>,
    expires_at_us: u64,
    /// Timed by this process's clock (no time came with the calls), so the
    /// background sweeper knows when it is dead.
    process_timed: bool,
}

impl Sweep for Sharded<Stored> {
    fn sweep(&self) {
        let now = process_now_us();
        self.purge_where(|entry| entry.process_timed && entry.expires_at_us <= now);
    }
}

impl Expires for Stored {
    fn expires_at_us(&self) -> u64 {
        self.expires_at_us
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        let keys = Arc::new(Sharded::new(SHARDS));
        sweeper::register(Arc::downgrade(&keys) as _);
        MemoryBackend { keys }
    }

    /// Number of keys held (including ones that expired but were not swept yet).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key whose state is back to untouched at `now_us`.
    pub fn purge_expired(&self, now_us: u64) {
        self.keys.purge_expired(now_us);
    }

    /// Binds one limiter, as [`Backend::bind`] does, to this store's own type.
    pub(crate) fn bind_memory(&self, limiter: Binding<'_>) -> MemoryBound {
        let prefix = self.keys.scope(&crate::key::key_prefix(limiter.prefix, limiter.policy, limiter.name));
        MemoryBound { keys: self.keys.clone(), prefix, policy: limiter.policy.clone() }
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl Backend for MemoryBackend {
    fn bind(&self, limiter: Binding<'_>) -> Arc<dyn Bound> {
        Arc::new(self.bind_memory(limiter))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

/// One limiter's keys and policy.
pub(crate) struct MemoryBound {
    keys: Arc<Sharded<Stored>>,
    /// Scopes the user's keys, as the limiter's prefix does on Redis; hashed once.
    prefix: Namespace,
    policy: Policy,
}

impl MemoryBound {
    /// Decides at `now_us`, or at this process's time when it is `None`.
    pub(crate) fn decide_now(&self, call: Call<'_>, now_us: Option<u64>) -> Outcome {
        self.decide_at(call.key, call.cost, call.kind, || now_us)
    }

    /// Decides at the time `read` gives, or this process's when it gives
    /// none, read once the key's shard is locked: calls on one key are
    /// decided in the order of their times.
    #[inline]
    fn decide_at(&self, key: &[u8], cost: u64, kind: CallKind, read: impl FnOnce() -> Option<u64>) -> Outcome {
        let mut client_clock = false;
        let (mut entry, now) = self.keys.entry_timed(MapKey { scope: &self.prefix, key }, || {
            let read = read();
            client_clock = read.is_some();
            read.map_or_else(process_now_us, crate::clock::bounded)
        });
        // As on Redis, only a write moves the expiry; a client clock keeps a
        // slack. The state lasts until its reset after the time judged at.
        let slack = if client_clock { CLIENT_CLOCK_SLACK_US } else { 0 };
        let expiry = |outcome: &Outcome| outcome.now_us + outcome.reset_after_us + slack;
        // An untouched key decides on an entry of its own, kept if it wrote a state.
        let mut fresh = Stored { state: None, expires_at_us: 0, process_timed: !client_clock };
        let held = entry.get_mut();
        let is_new = held.is_none();
        let decided = held.unwrap_or(&mut fresh);
        // An expired state counts as untouched.
        if decided.expires_at_us <= now {
            decided.state = None;
        }
        let (outcome, wrote) = algo::decide(&self.policy, &mut decided.state, now, cost, kind);
        if wrote {
            decided.expires_at_us = expiry(&outcome);
        }
        match (is_new, decided.state.is_some()) {
            (false, false) => entry.remove(),
            (true, true) => entry.insert_new(fresh),
            _ => {}
        }
        outcome
    }
}

impl Bound for MemoryBound {
    /// The decision made at once, at the time `clock` gives read under the
    /// key's lock; a call the policy's algorithm cannot make is refused,
    /// writing nothing.
    #[inline]
    fn decide<'a>(&'a self, call: Call<'_>, clock: &dyn Clock) -> Answer<'a> {
        if let Some(error) = algo::refused(self.policy.algorithm(), call.kind) {
            return Answer::Now(Err(error));
        }
        let outcome = self.decide_at(call.key, call.cost, call.kind, || clock.now_us());
        Answer::Now(Ok(outcome.into_decision(&self.policy)))
    }

    fn reset<'a>(&'a self, key: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        self.keys.remove(MapKey { scope: &self.prefix, key });
        Box::pin(std::future::ready(Ok(())))
    }

    fn remote(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;

    const T0: u64 = 1_767_225_600_000_000;

    fn bound(memory: &MemoryBackend, name: &str, policy: &Policy) -> Arc<dyn Bound> {
        memory.bind(Binding { prefix: "redlimit", name, policy, server_clock: false })
    }

    /// `call` decided at `now_us` (`None`: this process's time).
    fn now(bound: &dyn Bound, call: Call<'_>, now_us: Option<u64>) -> Decision {
        let clock = now_us.map(crate::ManualClock::starting_at);
        let clock: &dyn Clock = match &clock {
            Some(clock) => clock,
            None => &crate::clock::ServerClock,
        };
        match bound.decide(call, clock) {
            Answer::Now(decision) => decision.unwrap(),
            Answer::Later(_) => panic!("the memory store answers at once"),
        }
    }

    fn us(at: std::time::SystemTime) -> u64 {
        at.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64
    }

    #[tokio::test]
    async fn limiters_of_one_name_share_keys_and_a_reset_forgets_one() {
        let memory = MemoryBackend::new();
        let policy = Policy::gcra("2/1s", 1).unwrap();
        let (one, two) = (bound(&memory, "api", &policy), bound(&memory, "api", &policy));
        let other = bound(&memory, "other", &policy);
        let long = [b'k'; 300];
        for key in [&b"short"[..], &long] {
            let check = Call::check(key, 1);
            assert_eq!(now(&*one, check, Some(T0)).remaining, 1);
            assert_eq!(now(&*two, check.with_kind(CallKind::Peek), Some(T0)).remaining, 0, "the peek's answer");
            assert_eq!(now(&*two, check, Some(T0)).remaining, 0, "the peek took nothing");
            assert!(!now(&*one, check, Some(T0)).allowed);
            assert_eq!(now(&*other, check, Some(T0)).remaining, 1, "another name, other keys");
            one.reset(key).await.unwrap();
            assert_eq!(now(&*two, check, Some(T0)).remaining, 1, "reset through one, seen by the other");
        }
        assert_eq!(memory.len(), 4);
    }

    #[test]
    fn with_no_time_in_the_call_this_process_decides_and_no_slack_is_kept() {
        let memory = MemoryBackend::new();
        let limiter = bound(&memory, "api", &Policy::token_bucket(2, "1/1s").unwrap());
        let before = process_now_us();
        let decided = now(&*limiter, Call::check(b"k", 1), None);
        let at = us(decided.decided_at);
        assert!(at >= before && decided.reset_after == std::time::Duration::from_secs(1));
        memory.purge_expired(at + 999_999);
        assert_eq!(memory.len(), 1);
        memory.purge_expired(at + 1_000_000);
        assert_eq!(memory.len(), 0, "kept past its reset although the store keeps the time");
    }

    #[test]
    fn a_call_that_writes_nothing_on_an_expired_key_drops_it() {
        let memory = MemoryBackend::new();
        let limiter = bound(&memory, "api", &Policy::token_bucket(2, "1/1s").unwrap());
        now(&*limiter, Call::check(b"k", 1), Some(T0));
        let later = T0 + 1_000_000 + CLIENT_CLOCK_SLACK_US;
        let peek = now(&*limiter, Call::check(b"k", 1).with_kind(CallKind::Peek), Some(later));
        let fresh = now(&*limiter, Call::check(b"other", 1).with_kind(CallKind::Peek), Some(later));
        assert_eq!(peek, fresh, "an expired state counts as untouched");
        assert_eq!(memory.len(), 0);
    }
}
