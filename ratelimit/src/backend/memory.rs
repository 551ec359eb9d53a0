//! [`MemoryBackend`]: the in-process store, sharded, with idle keys dropped.

use super::{Backend, BoxFuture, Outcome, Request, CLIENT_CLOCK_SLACK_US};
use crate::algo::{self, State};
use crate::clock::process_now_us;
use crate::{Decision, Error, Policy};
use hashbrown::HashTable;
use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher, Hasher};
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
/// A [`Limiter`](crate::Limiter) gets its answer at once (no future, no key
/// built), decided in place; one keyed SipHash of the key picks both the
/// shard and the slot, so clients choosing keys cannot aim at one slot. The
/// limiter's part of the key is hashed once, when the limiter is made, so a
/// call hashes only the user's key.
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
    /// Keyed SipHash (keys are chosen by clients, so they must not be able
    /// to aim at one bucket); one hash per call picks the shard and the slot.
    hasher: RandomState,
}

#[derive(Debug, Default)]
struct Shard {
    entries: HashTable<Entry>,
    next_sweep_us: u64,
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    key: StoredKey,
    /// `None` only while a decision runs on an expired entry.
    state: Option<State>,
    expires_at_us: u64,
}

/// A key as the store holds it: in the entry itself when short (most keys),
/// so finding it costs no second memory access, else on the heap.
#[derive(Debug)]
enum StoredKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

const INLINE_KEY: usize = 62;

impl StoredKey {
    fn new(key: Key<'_>) -> StoredKey {
        let (head, tail) = match key {
            Key::Whole(key) => (key, &[][..]),
            Key::Parts(prefix, key) => (&prefix.bytes[..], key),
        };
        let len = head.len() + tail.len();
        if len > INLINE_KEY {
            return StoredKey::Heap([head, tail].concat().into());
        }
        let mut bytes = [0; INLINE_KEY];
        bytes[..head.len()].copy_from_slice(head);
        bytes[head.len()..len].copy_from_slice(tail);
        StoredKey::Inline { len: len as u8, bytes }
    }

    #[inline(always)]
    fn as_bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..*len as usize],
            StoredKey::Heap(bytes) => bytes,
        }
    }
}

/// The start of a limiter's storage keys (`<prefix>:`), with this store's
/// keyed hash already run over it: a call then hashes only the user's key,
/// and gets the hash of the whole key (SipHash reads its input as one
/// stream, however it is split), so a call by parts and one by the whole key
/// find the same entry.
#[derive(Debug, Clone)]
pub(crate) struct KeyPrefix {
    bytes: Box<[u8]>,
    hashed: DefaultHasher,
}

/// The key of one call: whole, or a limiter's prefix and the user's key
/// (the same bytes, never joined in memory).
#[derive(Clone, Copy)]
enum Key<'a> {
    Whole(&'a [u8]),
    Parts(&'a KeyPrefix, &'a [u8]),
}

impl Key<'_> {
    #[inline]
    fn is(self, stored: &[u8]) -> bool {
        match self {
            Key::Whole(key) => same_bytes(stored, key),
            Key::Parts(prefix, key) => {
                let (head, tail) = stored.split_at_checked(prefix.bytes.len()).unwrap_or_default();
                tail.len() == key.len() && same_bytes(head, &prefix.bytes) && same_bytes(tail, key)
            }
        }
    }
}

/// `a == b`, compared a word at a time in place: keys are short, and a
/// call to `memcmp` for each costs more than the comparison itself.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or_default());
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last word, overlapping the one before when `n` is not a multiple of 8.
    word(a, n - 8) == word(b, n - 8)
}

/// One decision's parameters other than its key.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) cost: u64,
    pub(crate) now_us: Option<u64>,
    pub(crate) peek: bool,
}

impl Shard {
    fn sweep(&mut self, now: u64) {
        self.entries.retain(|e| e.expires_at_us > now);
        self.next_sweep_us = now.saturating_add(SWEEP_EVERY_US);
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        MemoryBackend {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
        }
    }

    /// `prefix` with this store's hash run over it, for [`decide_parts`](Self::decide_parts).
    pub(crate) fn key_prefix(&self, prefix: &[u8]) -> KeyPrefix {
        let mut hashed = self.hasher.build_hasher();
        hashed.write(prefix);
        KeyPrefix { bytes: prefix.into(), hashed }
    }

    /// The key's hash, and its shard locked.
    #[inline]
    fn shard(&self, key: Key<'_>) -> (u64, MutexGuard<'_, Shard>) {
        // The bytes alone (SipHash mixes in their length itself): one write
        // per part, where `hash_one` would write a length prefix first.
        let hash = match key {
            Key::Whole(key) => {
                let mut hasher = self.hasher.build_hasher();
                hasher.write(key);
                hasher.finish()
            }
            Key::Parts(prefix, key) => {
                let mut hasher = prefix.hashed.clone();
                hasher.write(key);
                hasher.finish()
            }
        };
        // The table uses the low bits and the top seven; pick the shard from
        // bits in between, so a shard's keys still differ in both.
        let index = (hash >> 32) as usize % SHARDS;
        // A panic while holding a shard leaves at worst one key's state
        // taken out (that key is then untouched), never a half-written one,
        // so a poisoned lock is safe to reuse.
        (hash, self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Decides synchronously: the memory backend never waits. With no time in
    /// the request it decides by this process's own clock (see [`ServerClock`](crate::ServerClock)).
    pub fn decide_now(&self, request: &Request<'_>) -> Outcome {
        self.decide_key(Key::Whole(request.key), Call::of(request), process_now_us())
    }

    /// Decides for the key `prefix` + `key` (`prefix` made by
    /// [`key_prefix`](Self::key_prefix) on this store) at `call.now_us`, or
    /// at `own_now_us` when it has none, and makes the outcome the
    /// limiter's `Decision` here, so it is built once, where the caller
    /// keeps it.
    #[inline]
    pub(crate) fn decide_parts(&self, prefix: &KeyPrefix, key: &[u8], call: Call<'_>, own_now_us: u64) -> Decision {
        Decision::from_outcome(self.decide_key(Key::Parts(prefix, key), call, own_now_us), call.policy)
    }

    /// Decides at `call.now_us`, or at `own_now_us` (this store's own clock) when it has none.
    #[inline]
    fn decide_key(&self, key: Key<'_>, call: Call<'_>, own_now_us: u64) -> Outcome {
        let now = call.now_us.unwrap_or(own_now_us);
        let (hash, mut shard) = self.shard(key);
        if now >= shard.next_sweep_us {
            shard.sweep(now);
        }
        // As on Redis, only a write moves the expiry; other calls leave the entry as it was.
        let slack = if call.now_us.is_some() { CLIENT_CLOCK_SLACK_US } else { 0 };
        let expiry = |outcome: &Outcome| {
            (outcome.allowed && call.cost > 0 && !call.peek).then(|| now + outcome.reset_after_us + slack)
        };
        if let Ok(mut found) = shard.entries.find_entry(hash, |e| e.hash == hash && key.is(e.key.as_bytes())) {
            // Decided in place; an expired state counts as untouched.
            let entry = found.get_mut();
            if entry.expires_at_us <= now {
                entry.state = None;
            }
            let outcome = algo::decide(call.policy, &mut entry.state, now, call.cost, call.peek);
            entry.expires_at_us = expiry(&outcome).unwrap_or(entry.expires_at_us);
            if entry.state.is_none() {
                found.remove();
            }
            return outcome;
        }
        let mut state = None;
        let outcome = algo::decide(call.policy, &mut state, now, call.cost, call.peek);
        if state.is_some() {
            let entry = Entry { hash, key: StoredKey::new(key), state, expires_at_us: expiry(&outcome).unwrap_or(0) };
            shard.entries.insert_unique(hash, entry, |e| e.hash);
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

impl<'a> Call<'a> {
    fn of(request: &Request<'a>) -> Call<'a> {
        Call { policy: request.policy, cost: request.cost, now_us: request.now_us, peek: request.peek }
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

    fn decide_at_once(&self, request: &Request<'_>, local_now_us: u64) -> Option<Outcome> {
        Some(self.decide_key(Key::Whole(request.key), Call::of(request), local_now_us))
    }

    fn reset<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        let (hash, mut shard) = self.shard(Key::Whole(key));
        if let Ok(found) = shard.entries.find_entry(hash, |e| e.hash == hash && e.key.as_bytes() == key) {
            found.remove();
        }
        Box::pin(async { Ok(()) })
    }

    fn as_memory(&self) -> Option<&MemoryBackend> {
        Some(self)
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;

    const T0: u64 = 1_767_225_600_000_000;

    fn request<'a>(key: &'a [u8], policy: &'a Policy, now_us: Option<u64>, peek: bool) -> Request<'a> {
        Request { key, policy, cost: 1, now_us, peek }
    }

    #[tokio::test]
    async fn decide_and_decide_at_once_share_one_state_for_short_and_long_keys() {
        let memory = MemoryBackend::new();
        let policy = Policy::gcra("2/1s", 1).unwrap();
        let long = [b'k'; INLINE_KEY + 1];
        for key in [&b"short"[..], &long] {
            let at = |peek| request(key, &policy, Some(T0), peek);
            assert_eq!(memory.decide(at(false)).await.unwrap().remaining, 1);
            assert_eq!(memory.decide_at_once(&at(true), 0).unwrap().remaining, 0, "the peek's answer");
            assert_eq!(memory.decide_at_once(&at(false), 0).unwrap().remaining, 0, "the peek took nothing");
            assert!(!memory.decide(at(false)).await.unwrap().allowed);
            memory.reset(key).await.unwrap();
            assert_eq!(memory.decide_at_once(&at(false), 0).unwrap().remaining, 1, "reset found the key");
        }
        assert_eq!(memory.len(), 2);
    }

    #[tokio::test]
    async fn a_key_by_parts_is_the_same_entry_as_the_whole_key() {
        let memory = MemoryBackend::new();
        let policy = Policy::gcra("2/1s", 1).unwrap();
        let prefix = memory.key_prefix(b"ratelimit:gcra:3:api:");
        let call = Call { policy: &policy, cost: 1, now_us: Some(T0), peek: false };
        let long = [b'k'; INLINE_KEY];
        for key in [&b"user:1"[..], &long] {
            let whole = [&b"ratelimit:gcra:3:api:"[..], key].concat();
            assert_eq!(memory.decide_parts(&prefix, key, call, 0).remaining, 1);
            assert_eq!(
                memory.decide_now(&request(&whole, &policy, Some(T0), false)).remaining,
                0,
                "the whole key sees the call by parts"
            );
            assert!(!memory.decide_parts(&prefix, key, call, 0).allowed);
            memory.reset(&whole).await.unwrap();
            assert_eq!(memory.decide_parts(&prefix, key, call, 0).remaining, 1, "reset by the whole key found it");
        }
        // The same bytes split elsewhere are the same key, too.
        let other = memory.key_prefix(b"ratelimit:gcra:3:");
        assert_eq!(memory.decide_parts(&other, b"api:user:1", call, 0).remaining, 0);
        assert_eq!(memory.len(), 2);
    }

    #[test]
    fn same_bytes_agrees_with_slice_equality_at_every_length_and_difference() {
        let a: Vec<u8> = (0..40).collect();
        for n in 0..=a.len() {
            assert!(same_bytes(&a[..n], &a[..n]));
            for at in 0..n {
                let mut b = a[..n].to_vec();
                b[at] ^= 0x80;
                assert!(!same_bytes(&a[..n], &b), "a difference at {at} of {n}");
            }
            if n > 0 {
                assert!(!same_bytes(&a[..n], &a[..n - 1]));
            }
        }
    }

    #[test]
    fn with_no_time_in_the_request_the_callers_reading_is_used_and_no_slack_is_kept() {
        let memory = MemoryBackend::new();
        let policy = Policy::token_bucket(2, "1/1s").unwrap();
        let outcome = memory.decide_at_once(&request(b"k", &policy, None, false), T0).unwrap();
        assert_eq!((outcome.now_us, outcome.reset_after_us), (T0, 1_000_000));
        memory.purge_expired(T0 + 999_999);
        assert_eq!(memory.len(), 1);
        memory.purge_expired(T0 + 1_000_000);
        assert_eq!(memory.len(), 0, "kept past its reset although the store keeps the time");
    }

    #[test]
    fn a_call_that_writes_nothing_on_an_expired_key_drops_it() {
        let memory = MemoryBackend::new();
        let policy = Policy::token_bucket(2, "1/1s").unwrap();
        memory.decide_at_once(&request(b"k", &policy, None, false), T0).unwrap();
        let later = T0 + 1_000_000;
        let peek = memory.decide_at_once(&request(b"k", &policy, None, true), later).unwrap();
        let fresh = memory.decide_at_once(&request(b"other", &policy, None, true), later).unwrap();
        assert_eq!(peek, fresh, "an expired state counts as untouched");
        assert_eq!(memory.len(), 0);
    }
}
