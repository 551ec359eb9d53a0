//! [`Sharded`]: a map from byte keys to values that expire, spread over
//! independently locked shards. The memory store (keys scoped by each
//! limiter's prefix) and each limiter's deny cache are one.

use super::key_hash::{same, KeyedHash};
use hashbrown::HashTable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How often (in the map's time) a shard drops its expired values.
pub(crate) const SWEEP_EVERY_US: u64 = 1_000_000;
/// A shard's table is shrunk when it has room for more than this many times
/// the values it holds, so a burst's memory is given back once it expired.
const SHRINK_WHEN_ROOM_FOR: usize = 4;

/// A value that is dead from some time on.
pub(crate) trait Expires {
    /// The first µs at which the value is dead.
    fn expires_at_us(&self) -> u64;
}

/// Keys chosen by clients are hashed with a per-map random key, so no client
/// can aim many keys at one shard or slot.
#[derive(Debug)]
pub(crate) struct Sharded<V> {
    /// A power of two of them, so a hash picks one with a mask.
    shards: Box<[Mutex<Shard<V>>]>,
    hasher: KeyedHash,
    /// Values held in all shards, so an empty map is skipped without a lock.
    len: AtomicUsize,
    /// Every scope made, by its bytes: the same bytes get the same id.
    scopes: Mutex<HashMap<Box<[u8]>, u64>>,
}

#[derive(Debug)]
struct Shard<V> {
    slots: HashTable<Slot<V>>,
    next_sweep_us: u64,
}

#[derive(Debug)]
struct Slot<V> {
    scope: u64,
    key: StoredKey,
    value: V,
}

/// A key's bytes: in the slot itself when short, as most keys are, so
/// finding a key reads no memory beyond its slot; boxed otherwise.
#[derive(Debug)]
enum StoredKey {
    Short { len: u8, bytes: [u8; SHORT_KEY] },
    Long(Box<[u8]>),
}

/// The longest key kept in its slot: the room a boxed one takes, and a word.
const SHORT_KEY: usize = 22;

impl StoredKey {
    fn new(key: &[u8]) -> StoredKey {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= SHORT_KEY => {
                let mut bytes = [0; SHORT_KEY];
                bytes[..key.len()].copy_from_slice(key);
                StoredKey::Short { len, bytes }
            }
            _ => StoredKey::Long(key.into()),
        }
    }

    fn get(&self) -> &[u8] {
        match self {
            StoredKey::Short { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            StoredKey::Long(bytes) => bytes,
        }
    }
}

/// The first part of keys (a limiter's prefix, or nothing), made once: an
/// id that stands for its bytes, and the map's keyed hash already run over
/// it, so a call hashes and compares only its own key.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    id: u64,
    hashed: u64,
}

/// A key within a scope: two keys are the same only when both parts are.
#[derive(Clone, Copy)]
pub(crate) struct MapKey<'a> {
    pub(crate) scope: &'a Namespace,
    pub(crate) key: &'a [u8],
}

impl MapKey<'_> {
    fn is(&self, slot: &Slot<impl Sized>) -> bool {
        slot.scope == self.scope.id && same(slot.key.get(), self.key)
    }
}

/// One key's place in a locked shard.
pub(crate) struct Entry<'a, V> {
    map: &'a Sharded<V>,
    shard: MutexGuard<'a, Shard<V>>,
    hash: u64,
    key: MapKey<'a>,
}

impl<V: Expires> Sharded<V> {
    /// An empty map of `shards` shards (rounded up to a power of two).
    pub(crate) fn new(shards: usize) -> Self {
        let shards =
            (0..shards.next_power_of_two()).map(|_| Mutex::new(Shard { slots: HashTable::new(), next_sweep_us: 0 }));
        let scopes = Mutex::default();
        Sharded { shards: shards.collect(), hasher: KeyedHash::new(), len: AtomicUsize::new(0), scopes }
    }

    /// `bytes` as the first part of keys of this map.
    pub(crate) fn scope(&self, bytes: &[u8]) -> Namespace {
        // Ids are only ever added, so a poisoned lock holds nothing half-written.
        let mut scopes = self.scopes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = scopes.len() as u64;
        let id = *scopes.entry(bytes.into()).or_insert(next);
        Namespace { id, hashed: self.hasher.scope(id) }
    }

    /// Values held, including expired ones not swept yet.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// `key`'s shard, locked; dead values are swept from it first when due.
    pub(crate) fn entry<'a>(&'a self, key: MapKey<'a>, now_us: u64) -> Entry<'a, V> {
        self.entry_timed(key, || now_us).0
    }

    /// `key`'s shard, locked, and the time `now` reads once it is (swept
    /// by that time when due, as [`Sharded::entry`] does).
    #[inline]
    pub(crate) fn entry_timed<'a>(&'a self, key: MapKey<'a>, now: impl FnOnce() -> u64) -> (Entry<'a, V>, u64) {
        let mut entry = self.locked(key);
        let now_us = now();
        if now_us >= entry.shard.next_sweep_us {
            self.sweep(&mut entry.shard, now_us);
        }
        (entry, now_us)
    }

    /// Drops `key`'s value. No sweep: the caller may not know the map's time.
    pub(crate) fn remove(&self, key: MapKey<'_>) {
        self.locked(key).remove();
    }

    #[inline]
    fn locked<'a>(&'a self, key: MapKey<'a>) -> Entry<'a, V> {
        let hash = self.hasher.key(key.scope.hashed, key.key);
        // The table uses the low bits and the top seven: pick the shard from others.
        let index = (hash >> 32) as usize & (self.shards.len() - 1);
        // Values are replaced whole, so a poisoned lock holds nothing half-written.
        let shard = self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Entry { map: self, shard, hash, key }
    }

    /// Drops every value dead at `now_us`.
    pub(crate) fn purge_expired(&self, now_us: u64) {
        self.purge_where(|value| value.expires_at_us() <= now_us);
    }

    /// Drops every value `dead` says is, shard by shard (one lock at a time).
    pub(crate) fn purge_where(&self, dead: impl Fn(&V) -> bool) {
        for shard in self.shards.iter() {
            if self.len() == 0 {
                return;
            }
            self.drop_dead(&mut shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()), &dead);
        }
    }

    fn sweep(&self, shard: &mut Shard<V>, now_us: u64) {
        self.drop_dead(shard, |value| value.expires_at_us() <= now_us);
        shard.next_sweep_us = now_us.saturating_add(SWEEP_EVERY_US);
    }

    fn drop_dead(&self, shard: &mut Shard<V>, dead: impl Fn(&V) -> bool) {
        let before = shard.slots.len();
        shard.slots.retain(|slot| !dead(&slot.value));
        let held = shard.slots.len();
        self.len.fetch_sub(before - held, Ordering::Relaxed);
        if shard.slots.capacity() > SHRINK_WHEN_ROOM_FOR * held {
            shard.slots.shrink_to(2 * held, |slot| self.hash_of(slot));
        }
    }
}

impl<V> Sharded<V> {
    /// A held key's hash, worked out again: only a table that grows or
    /// shrinks needs it, so slots do not keep it.
    fn hash_of(&self, slot: &Slot<V>) -> u64 {
        self.hasher.key(self.hasher.scope(slot.scope), slot.key.get())
    }
}

impl<V> Entry<'_, V> {
    /// The value held for the key.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut V> {
        let (hash, key) = (self.hash, self.key);
        self.shard.slots.find_mut(hash, |slot| key.is(slot)).map(|slot| &mut slot.value)
    }

    /// Holds `value` for the key, replacing any.
    pub(crate) fn insert(&mut self, value: V) {
        match self.get_mut() {
            Some(held) => *held = value,
            None => self.insert_new(value),
        }
    }

    /// Holds `value` for a key that holds none (the caller found none
    /// under this lock), without looking for it again.
    pub(crate) fn insert_new(&mut self, value: V) {
        let slot = Slot { scope: self.key.scope.id, key: StoredKey::new(self.key.key), value };
        let map = self.map;
        self.shard.slots.insert_unique(self.hash, slot, |slot| map.hash_of(slot));
        self.map.len.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops the key's value.
    pub(crate) fn remove(&mut self) {
        let (hash, key) = (self.hash, self.key);
        if let Ok(found) = self.shard.slots.find_entry(hash, |slot| key.is(slot)) {
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
        let none = map.scope(b"");
        let key = |key| MapKey { scope: &none, key };
        map.entry(key(b"a"), 0).insert(10);
        map.entry(key(b"b"), 0).insert(5_000_000);
        map.entry(key(b"a"), 0).insert(20);
        assert_eq!((map.entry(key(b"a"), 1).get_mut().copied(), map.len()), (Some(20), 2));
        map.remove(key(b"b"));
        assert_eq!((map.entry(key(b"b"), 1).get_mut().copied(), map.len()), (None, 1));
        // "a" is dead from 20 on, but a shard is swept at most once a second.
        drop(map.entry(key(b"a"), 999_999));
        assert_eq!(map.len(), 1);
        map.purge_expired(1_000_000);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn a_swept_burst_gives_its_room_back() {
        let map = Sharded::<u64>::new(2);
        let none = map.scope(b"");
        for i in 0..10_000u64 {
            map.entry(MapKey { scope: &none, key: &i.to_le_bytes() }, 0).insert(if i < 10 { u64::MAX } else { 5 });
        }
        let room = |map: &Sharded<u64>| map.shards.iter().map(|s| s.lock().unwrap().slots.capacity()).sum::<usize>();
        assert!(room(&map) >= 10_000);
        map.purge_where(|&expires| expires <= 5);
        assert_eq!(map.len(), 10);
        assert!(room(&map) <= 100, "{} slots kept for 10 values", room(&map));
        assert_eq!(map.entry(MapKey { scope: &none, key: &3u64.to_le_bytes() }, 0).get_mut().copied(), Some(u64::MAX));
    }

    #[test]
    fn keys_of_every_length_short_or_boxed_are_found_after_the_table_grows_and_shrinks() {
        let map = Sharded::<u64>::new(1);
        let (none, other) = (map.scope(b""), map.scope(b"x"));
        let keys: Vec<Vec<u8>> = (0..=40).flat_map(|len| [vec![b'k'; len], vec![len as u8; len]]).collect();
        for (i, key) in keys.iter().enumerate() {
            map.entry(MapKey { scope: &none, key }, 0).insert(i as u64);
            map.entry(MapKey { scope: &other, key }, 0).insert(1000 + i as u64);
        }
        let expected = |map: &Sharded<u64>| {
            keys.iter().enumerate().all(|(i, key)| {
                let held = |scope, map: &Sharded<u64>| map.entry(MapKey { scope, key }, 0).get_mut().copied();
                // The empty key appears twice: its later insert replaced the value.
                let last = keys.iter().rposition(|k| k == key).unwrap_or(i) as u64;
                held(&none, map) == Some(last) && held(&other, map) == Some(1000 + last)
            })
        };
        assert!(expected(&map));
        for i in 0..1000u64 {
            map.entry(MapKey { scope: &none, key: &i.to_le_bytes() }, 0).insert(u64::MAX);
        }
        map.purge_where(|&value| value == u64::MAX);
        assert!(expected(&map), "found again once the table grew and shrank");
    }

    #[test]
    fn keys_that_differ_in_any_byte_are_distinct() {
        let map = Sharded::<u64>::new(1);
        let (none, a) = (map.scope(b""), map.scope(b"a"));
        let key = |key| MapKey { scope: &none, key };
        for bytes in [&b""[..], b"a", b"a\0", b"\0a", b"ab"] {
            map.entry(key(bytes), 0).insert(bytes.len() as u64 + 100);
        }
        assert_eq!(map.len(), 5);
        assert_eq!(map.entry(key(b"a\0"), 0).get_mut().copied(), Some(102));
        // The same bytes split elsewhere between scope and key are another key,
        // and a scope made again from the same bytes is the same scope.
        map.entry(MapKey { scope: &a, key: b"b" }, 0).insert(1);
        assert_eq!(map.entry(key(b"ab"), 0).get_mut().copied(), Some(102));
        assert_eq!(map.entry(MapKey { scope: &a, key: b"b" }, 0).get_mut().copied(), Some(1));
        assert_eq!(map.entry(MapKey { scope: &map.scope(b"a"), key: b"b" }, 0).get_mut().copied(), Some(1));
    }
}
