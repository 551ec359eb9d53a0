//! The Redis backend decides a sliding window with many sub-windows by the
//! totals layout (`lua/sliding_window_totals.lua`, O(1) per call) and one
//! with few by the hash layout, and either way answers as the memory twin;
//! both record the precision they counted at, in one key whatever it is.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Replays a seeded timeline on both stores, comparing every decision, and
/// returns the Redis key's "p" field: the precision, and in the totals
/// layout the windows its totals were made for.
async fn replay(policy: Policy, seed: u64) -> String {
    let both = BothStores::start().await;
    let on_memory = Limiter::new("layout", policy.clone(), &both.memory).with_deny_cache(false);
    let on_redis = Limiter::new("layout", policy.clone(), &both.redis).with_deny_cache(false);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut denied = 0;
    for step in 0..400 {
        both.clock.advance(Duration::from_micros(rng.random_range(0..150_000)));
        let cost = if rng.random_range(0..10) == 0 { rng.random_range(0..6) } else { 1 };
        let (memory, redis): (Decision, Decision) = if rng.random_range(0..10) == 0 {
            (on_memory.peek("k", cost).await.unwrap(), on_redis.peek("k", cost).await.unwrap())
        } else {
            (on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap())
        };
        assert_eq!(memory, redis, "{policy}, step {step}, cost {cost}");
        denied += usize::from(!memory.allowed);
    }
    assert!(denied > 20, "{policy}: the timeline never reached the limit ({denied} denials)");

    let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut con).await.unwrap();
    assert_eq!(keys, ["redlimit:sliding_window/v2:6:layout:k"], "one key per limiter and user key");
    redis::cmd("HGET").arg(&keys[0]).arg("p").query_async(&mut con).await.unwrap()
}

#[tokio::test]
async fn many_sub_windows_use_the_totals_layout_and_answer_as_memory() {
    // 50 and 200 sub-windows of 100 ms, two strategies (quotas compared too).
    assert_eq!(replay(Policy::sliding_window("20/5s,60/20s", "100ms").unwrap(), 1).await, "100000:5000000:20000000");
}

#[tokio::test]
async fn sixteen_sub_windows_are_enough_for_the_totals_layout() {
    assert_eq!(replay(Policy::sliding_window("12/1600ms", "100ms").unwrap(), 2).await, "100000:1600000");
}

#[tokio::test]
async fn few_sub_windows_keep_the_hash_layout() {
    assert_eq!(replay(Policy::sliding_window("12/1500ms", "100ms").unwrap(), 3).await, "100000");
}
