//! The bucket scripts keep their state as 33 bytes (`struct.pack('<ddBdd', ..)`:
//! no number parsing or formatting per call), or 41 with the step of an
//! interval refill, and gcra its TAT as 24 or 32
//! bytes, each with the rate it is counted in; a key in that form gets the
//! same answers as the memory twin. No other form is read: the
//! state-format version in every key keeps state of another format under
//! another key.

use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// The state of the only key on the server, decoded from the 33-byte form
/// (or the 41-byte one): the units owed, when they were counted, the period
/// they are counted in, and the step an interval refill pays by (1 when
/// continuous, and then not written).
async fn packed_state(con: &mut MultiplexedConnection) -> (f64, f64, f64, f64) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(con).await.unwrap();
    let double = |at: usize| f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    match bytes.len() {
        33 => (double(0), double(8), double(17), 1.0),
        41 => (double(0), double(8), double(17), double(33)),
        other => panic!("the state is two doubles, a byte and two or three doubles, not {other} bytes: {bytes:?}"),
    }
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
        let (_, _, period, step) = packed_state(&mut con).await;
        assert_eq!((period, step), (1_500_000.0, 1.0), "{policy}: units of 1/2 token per 3 s, refilled continuously");
        for (advance_ms, cost) in [(400, 1), (0, 2), (2_000, 3), (5, 1)] {
            both.clock.advance(Duration::from_millis(advance_ms));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        packed_state(&mut con).await;
    }
}

#[tokio::test]
async fn an_interval_refill_keeps_its_step_and_a_switch_reads_both_forms() {
    let both = BothStores::start().await;
    let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let continuous = Policy::token_bucket(10, "10/1s").unwrap();
    let by_interval = Policy::token_bucket_interval(10, "10/1s").unwrap();
    // Back and forth between the two refills of one rate, each write in its own form.
    for (advance_ms, policy, cost, step) in
        [(0, &by_interval, 4, 1_000_000.0), (300, &continuous, 2, 1.0), (900, &by_interval, 3, 1_000_000.0)]
    {
        both.clock.advance(Duration::from_millis(advance_ms));
        let on_memory = Limiter::new("formats", policy.clone(), &both.memory).with_deny_cache(false);
        let on_redis = Limiter::new("formats", policy.clone(), &both.redis).with_deny_cache(false);
        assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        assert_eq!(packed_state(&mut con).await.3, step, "{policy}");
    }
}

/// gcra's state as (whole µs, remainder in units, n, p), from its 24-byte or
/// 32-byte binary form.
async fn gcra_state(con: &mut MultiplexedConnection) -> (u64, u64, u64, u64) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes: Vec<u8> = redis::cmd("GET").arg(&keys[0]).query_async(con).await.unwrap();
    let double = |at: usize| f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as u64;
    match bytes.len() {
        24 => (double(0), 0, double(8), double(16)),
        32 => (double(0), double(8), double(16), double(24)),
        other => panic!("gcra's state is 24 or 32 bytes, not {other}: {bytes:?}"),
    }
}

#[tokio::test]
async fn gcra_states_are_packed_and_read_back() {
    // 7 per 3 s: n = 7, so a TAT holds sevenths of a µs (32 bytes); 2 per
    // 1 s: n = 1, whole µs (24 bytes).
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
        let (_, rem, n, p) = gcra_state(&mut con).await;
        assert_eq!(rem != 0, with_remainder, "{policy}: the timeline must leave the form under test");
        assert_eq!(
            (n, p),
            if with_remainder { (7, 3_000_000) } else { (1, 500_000) },
            "{policy}: the rate it is counted in"
        );
        for (advance_us, cost) in [(400_000, 1), (0, 1), (2_000_001, 3), (5, 1), (1_500_000, 0)] {
            both.clock.advance(Duration::from_micros(advance_us));
            assert_eq!(on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap(), "{policy}");
        }
        gcra_state(&mut con).await;
    }
}
