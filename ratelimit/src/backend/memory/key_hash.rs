//! How the memory map hashes and compares its keys: a keyed hash made for
//! short keys, and an equality that reads them a word at a time.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
/// The map's keyed hash: foldhash's scheme (hashbrown's default hasher),
/// words of the key folded in by a 128-bit multiply with random seeds. Keys
/// are short, and SipHash cost more than the rest of an in-memory decision.
#[derive(Debug)]
pub(crate) struct KeyedHash {
    seeds: [u64; 4],
}

impl KeyedHash {
    pub(crate) fn new() -> KeyedHash {
        // std's per-process randomness, drawn anew for each map.
        let random = RandomState::new();
        KeyedHash { seeds: [0u8, 1, 2, 3].map(|i| random.hash_one(i)) }
    }

    pub(crate) fn scope(&self, id: u64) -> u64 {
        fold(id ^ self.seeds[0], self.seeds[1])
    }

    /// The hash of `key` in the scope hashed as `scope`; its length is
    /// folded in first, so each word read below stands for distinct bytes.
    #[inline]
    pub(crate) fn key(&self, scope: u64, key: &[u8]) -> u64 {
        let [_, _, s2, s3] = self.seeds;
        let mut hashed = scope ^ key.len() as u64;
        let mut rest = key;
        while let Some((words, tail)) = rest.split_first_chunk::<16>().filter(|(_, tail)| !tail.is_empty()) {
            hashed = fold(hashed ^ first::<8>(words) ^ s2, last::<8>(words) ^ s3);
            rest = tail;
        }
        // The last 1 to 16 bytes, read as two words that may overlap.
        let (a, b) = match rest.len() {
            8.. => (first::<8>(rest), last::<8>(rest)),
            4.. => (first::<4>(rest), last::<4>(rest)),
            1.. => (u64::from(rest[0]), u64::from(rest[rest.len() / 2]) << 8 | u64::from(rest[rest.len() - 1])),
            0 => (0, 0),
        };
        fold(hashed ^ a ^ s2, b ^ s3)
    }
}

/// The 128-bit product of `a` and `b`, its halves xored.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ (product >> 64) as u64
}

/// The first `N` (at most 8) bytes of `bytes` as a little-endian word; 0 if it is shorter.
#[inline]
fn first<const N: usize>(bytes: &[u8]) -> u64 {
    bytes.first_chunk::<N>().map_or(0, word)
}

/// The last `N` (at most 8) bytes of `bytes` as a little-endian word; 0 if it is shorter.
#[inline]
fn last<const N: usize>(bytes: &[u8]) -> u64 {
    bytes.last_chunk::<N>().map_or(0, word)
}

#[inline]
fn word<const N: usize>(chunk: &[u8; N]) -> u64 {
    let mut word = [0; 8];
    word[..N].copy_from_slice(chunk);
    u64::from_le_bytes(word)
}

/// `a == b`: keys are short, and a call to `memcmp` for each costs more
/// than comparing them a word or a byte at a time (BENCHMARKS.md, the deny cache).
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    match a.len() {
        _ if a.len() != b.len() => false,
        // The first and last 8 bytes, which may overlap, cover all of them.
        8..=16 => first::<8>(a) == first::<8>(b) && last::<8>(a) == last::<8>(b),
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}
