//! When a connection has been idle long enough that Redis (`timeout`) or a
//! middlebox may have closed it; and which slot of a cluster a key is in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a connection may go without an answer before a request asks
/// `PING` first: under a second, the shortest idle `timeout` Redis takes,
/// and Redis closes a client only after more than that whole second.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(500);

/// A cluster's hash slots.
#[cfg(feature = "cluster")]
pub(crate) const SLOTS: usize = 16_384;

/// When the connection last answered, µs on this process's monotonic clock.
pub(crate) struct Answered {
    at_us: AtomicU64,
}

fn now_us() -> u64 {
    crate::clock::process_ns() / 1000
}

impl Answered {
    pub(crate) fn new() -> Answered {
        Answered { at_us: AtomicU64::new(now_us()) }
    }

    pub(crate) fn touch(&self) {
        // Two touches may race and store slightly out of order: a probe
        // then comes a few µs early, which is harmless.
        self.at_us.store(now_us(), Ordering::Relaxed);
    }

    pub(crate) fn idle(&self) -> bool {
        now_us().saturating_sub(self.at_us.load(Ordering::Relaxed)) >= PROBE_AFTER.as_micros() as u64
    }
}

/// Redis Cluster's slot of `key`: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, when not empty), else of the key.
/// Written here because redis-rs computes slots (`cluster_routing::Slot`)
/// but does not give their number out.
#[cfg(feature = "cluster")]
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % SLOTS as u16
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::slot;

    #[test]
    fn slots_are_redis_clusters() {
        // From Redis's cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12_182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"), "an empty first tag hashes the whole key");
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }
}
