//! [`Sharded`]: a map from byte keys to values that expire, spread over
//! independently locked shards. The memory store's tables and the deny cache
//! are each one.

use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How often (in the map's time) a shard drops its expired values.
const SWEEP_EVERY_US: u64 = 1_000_000;

/// A value that is dead from some time on.
pub(crate) trait Expires {
    /// The first µs at which the value is dead.
    fn expires_at_us(&self) -> u64;
}

/// Keys chosen by clients are hashed with a per-map random key, so no client
/// can aim many keys at one shard or slot.
#[derive(Debug)]
pub(crate) struct Sharded<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    hasher: RandomState,
    /// Values held in all shards, so an empty map is skipped without a lock.
    len: AtomicUsize,
}

#[derive(Debug)]
struct Shard<V> {
    slots: HashTable<Slot<V>>,
    next_sweep_us: u64,
}

#[derive(Debug)]
struct Slot<V> {
    hash: u64,
    key: Box<[u8]>,
    value: V,
}

/// One key's place in a locked shard.
pub(crate) struct Entry<'a, V> {
    map: &'a Sharded<V>,
    shard: MutexGuard<'a, Shard<V>>,
    hash: u64,
    key: &'a [u8],
}

impl<V: Expires> Sharded<V> {
    /// An empty map of `shards` shards.
    pub(crate) fn new(shards: usize) -> Self {
        let shards = (0..shards.max(1)).map(|_| Mutex::new(Shard { slots: HashTable::new(), next_sweep_us: 0 }));
        Sharded { shards: shards.collect(), hasher: RandomState::new(), len: AtomicUsize::new(0) }
    }

    /// Values held, including expired ones not swept yet.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// `key`'s shard, locked; dead values are swept from it first when due.
    pub(crate) fn entry<'a>(&'a self, key: &'a [u8], now_us: u64) -> Entry<'a, V> {
        let hash = self.hasher.hash_one(key);
        // The table uses the low bits and the top seven: pick the shard from others.
        let index = (hash >> 32) as usize % self.shards.len();
        // Values are replaced whole, so a poisoned lock holds nothing half-written.
        let mut shard = self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if now_us >= shard.next_sweep_us {
            self.sweep(&mut shard, now_us);
        }
        Entry { map: self, shard, hash, key }
    }

    /// Drops every value dead at `now_us`.
    pub(crate) fn purge_expired(&self, now_us: u64) {
        for shard in self.shards.iter() {
            self.sweep(&mut shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()), now_us);
        }
    }

    fn sweep(&self, shard: &mut Shard<V>, now_us: u64) {
        let before = shard.slots.len();
        shard.slots.retain(|slot| slot.value.expires_at_us() > now_us);
        self.len.fetch_sub(before - shard.slots.len(), Ordering::Relaxed);
        shard.next_sweep_us = now_us.saturating_add(SWEEP_EVERY_US);
    }
}

impl<V> Entry<'_, V> {
    /// The value held for the key.
    pub(crate) fn get_mut(&mut self) -> Option<&mut V> {
        let (hash, key) = (self.hash, self.key);
        self.shard.slots.find_mut(hash, |slot| slot.hash == hash && *slot.key == *key).map(|slot| &mut slot.value)
    }

    /// Holds `value` for the key, replacing any.
    pub(crate) fn insert(&mut self, value: V) {
        match self.get_mut() {
            Some(held) => *held = value,
            None => {
                let slot = Slot { hash: self.hash, key: self.key.into(), value };
                self.shard.slots.insert_unique(self.hash, slot, |slot| slot.hash);
                self.map.len.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Drops the key's value.
    pub(crate) fn remove(&mut self) {
        let (hash, key) = (self.hash, self.key);
        if let Ok(found) = self.shard.slots.find_entry(hash, |slot| slot.hash == hash && *slot.key == *key) {
            found.remove();
            self.map.len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Values in this key's shard.
    pub(crate) fn shard_len(&self) -> usize {
        self.shard.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Expires for u64 {
        fn expires_at_us(&self) -> u64 {
            *self
        }
    }

    #[test]
    fn values_are_found_replaced_removed_and_swept_when_due() {
        let map = Sharded::<u64>::new(4);
        map.entry(b"a", 0).insert(10);
        map.entry(b"b", 0).insert(5_000_000);
        map.entry(b"a", 0).insert(20);
        assert_eq!((map.entry(b"a", 1).get_mut().copied(), map.len()), (Some(20), 2));
        map.entry(b"b", 1).remove();
        assert_eq!((map.entry(b"b", 1).get_mut().copied(), map.len()), (None, 1));
        // "a" is dead from 20 on, but a shard is swept at most once a second.
        drop(map.entry(b"a", 999_999));
        assert_eq!(map.len(), 1);
        map.purge_expired(1_000_000);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn keys_that_differ_in_any_byte_are_distinct() {
        let map = Sharded::<u64>::new(1);
        for key in [&b""[..], b"a", b"a\0", b"\0a", b"ab"] {
            map.entry(key, 0).insert(key.len() as u64 + 100);
        }
        assert_eq!(map.len(), 5);
        assert_eq!(map.entry(b"a\0", 0).get_mut().copied(), Some(102));
    }
}
