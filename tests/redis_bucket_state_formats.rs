//! The bucket scripts keep their state as 17 bytes (`struct.pack('<ddB', ..)`:
//! no number parsing or formatting per call), and gcra its TAT as 8 or 17
//! bytes; a key in that form gets the same answers as the memory twin. No
//! other form is read: the state-format version in every key keeps state of
//! another format under another key.

use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// The state of the only key on the server, decoded from the 17-byte form.
async fn packed_state(con: &mut MultiplexedConnection) -> (f64, f64) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(con).await.unwrap();
    assert_eq!(bytes.len(), 17, "the state is two packed doubles and a byte: {bytes:?}");
    let units = f64::from_le_bytes(bytes[..8].try_into().unwrap());
    let last = f64::from_le_bytes(bytes[8..16].try_into().unwrap());
    (units, last)
}

#[tokio::test]
async fn bucket_states_are_packed_and_read_back() {
    for policy in [Policy::token_bucket(5, "2/3s").unwrap(), Policy::leaky_bucket(5, "2/3s").unwrap()] {
        let both = BothStores::start().await;
        let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let on_memory = Limiter::new("formats", policy.clone(), &both.memory).with_deny_cache(false);
        let on_redis = Limiter::new("formats", policy.clone(), &both.redis).with_deny_cache(false);
        // A state with a fraction of a token (2 tokens per 3 s), then later calls.
        for (advance_ms, cost) in [(0, 3), (700, 1), (1, 0)] {
            both.clock.advance(Duration::from_millis(advance_ms));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        packed_state(&mut con).await;
        for (advance_ms, cost) in [(400, 1), (0, 2), (2_000, 3), (5, 1)] {
            both.clock.advance(Duration::from_millis(advance_ms));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        packed_state(&mut con).await;
    }
}

/// gcra's state as (whole µs, remainder in units), from its 8-byte or
/// 17-byte binary form.
async fn gcra_state(con: &mut MultiplexedConnection) -> (u64, u64) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(con).await.unwrap();
    let double = |at: usize| f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as u64;
    match bytes.len() {
        8 => (double(0), 0),
        17 => (double(0), double(8)),
        other => panic!("gcra's state is 8 or 17 bytes, not {other}: {bytes:?}"),
    }
}

#[tokio::test]
async fn gcra_states_are_packed_and_read_back() {
    // 7 per 3 s: n = 7, so a TAT holds sevenths of a µs (17 bytes); 2 per
    // 1 s: n = 1, whole µs (8 bytes).
    for (policy, with_remainder) in
        [(Policy::gcra("7/3s", 3).unwrap(), true), (Policy::gcra("2/1s", 3).unwrap(), false)]
    {
        let both = BothStores::start().await;
        let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let on_memory = Limiter::new("formats", policy.clone(), &both.memory).with_deny_cache(false);
        let on_redis = Limiter::new("formats", policy.clone(), &both.redis).with_deny_cache(false);
        for (advance_us, cost) in [(0, 2), (700_001, 1), (1, 0)] {
            both.clock.advance(Duration::from_micros(advance_us));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        let (_, rem) = gcra_state(&mut con).await;
        assert_eq!(rem != 0, with_remainder, "{policy}: the timeline must leave the form under test");
        for (advance_us, cost) in [(400_000, 1), (0, 1), (2_000_001, 3), (5, 1), (1_500_000, 0)] {
            both.clock.advance(Duration::from_micros(advance_us));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        gcra_state(&mut con).await;
    }
}
