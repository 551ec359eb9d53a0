//! The Redis backend's sliding window (`lua/sliding_window.lua`: one string
//! per key, running totals beside a ring of sub-windows) answers as the
//! memory twin, however many sub-windows its windows hold, and across
//! changes of policy that add or drop strategies or change the precision.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Replays a seeded timeline on both stores, each call under one of
/// `policies` (drawn per call, all of one limiter name), time moving by up
/// to `step_us`, comparing every decision. Returns the Redis key's state.
async fn replay(policies: &[Policy], step_us: u64, seed: u64) -> Vec<u8> {
    let both = BothStores::start().await;
    let limiters: Vec<(Limiter, Limiter)> = policies
        .iter()
        .map(|policy| {
            let memory = Limiter::new("layout", policy.clone(), &both.memory).with_deny_cache(false);
            (memory, Limiter::new("layout", policy.clone(), &both.redis).with_deny_cache(false))
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut denied = 0;
    for step in 0..400 {
        both.clock.advance(Duration::from_micros(rng.random_range(0..step_us)));
        let cost = if rng.random_range(0..10) == 0 { rng.random_range(0..6) } else { 1 };
        let which = rng.random_range(0..limiters.len());
        let (on_memory, on_redis) = &limiters[which];
        let (memory, redis): (Decision, Decision) = if rng.random_range(0..10) == 0 {
            (on_memory.peek("k", cost).await.unwrap(), on_redis.peek("k", cost).await.unwrap())
        } else {
            (on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap())
        };
        assert_eq!(memory, redis, "{}, step {step}, cost {cost}", policies[which]);
        denied += usize::from(!memory.allowed);
    }
    assert!(denied > 20, "{}: the timeline never reached the limit ({denied} denials)", policies[0]);

    let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut con).await.unwrap();
    assert_eq!(keys, ["redlimit:sliding_window/v3:6:layout:k"], "one key per limiter and user key");
    redis::cmd("GET").arg(&keys[0]).query_async(&mut con).await.unwrap()
}

/// What the state says it was written under: the precision and the number
/// of strategies.
fn signature(state: &[u8]) -> (f64, f64) {
    let at = |i: usize| f64::from_le_bytes(state[8 * i..8 * i + 8].try_into().unwrap());
    (at(3), at(0))
}

fn sliding(strategies: &str, precision: &str) -> Policy {
    Policy::sliding_window(strategies, precision).unwrap()
}

#[tokio::test]
async fn few_and_many_sub_windows_answer_as_memory() {
    // 15, 50 and 200 sub-windows of 100 ms, two strategies (quotas compared too).
    let state = replay(&[sliding("20/5s,60/20s", "100ms")], 150_000, 1).await;
    assert_eq!(signature(&state), (100_000.0, 2.0));
    assert_eq!(state.len(), 8 * (3 + 5 + 2 + 200), "k, n, x, the policy's numbers, two totals, a ring of 200");
    replay(&[sliding("12/1500ms", "100ms")], 150_000, 3).await;
}

#[tokio::test]
async fn an_hour_at_one_second_stays_exact() {
    // 3 600 sub-windows, and time moving by up to 40 s: many leave per call.
    let state = replay(&[sliding("60/1h,10/1m", "1s")], 40_000_000, 4).await;
    assert_eq!(signature(&state), (1_000_000.0, 2.0));
}

#[tokio::test]
async fn strategies_added_and_dropped_and_precisions_changed_answer_as_memory() {
    let policies = [
        sliding("8/2s", "100ms"),
        sliding("8/2s,20/6s", "100ms"),
        sliding("20/6s", "100ms"),
        sliding("8/2s,20/6s", "500ms"),
        sliding("20/6s,8/2s", "1s"),
    ];
    for seed in 10..13 {
        replay(&policies, 200_000, seed).await;
    }
}

#[tokio::test]
async fn changes_between_rings_read_whole_and_read_in_part_answer_as_memory() {
    // 10 and 20 sub-windows are read whole; 100 and 200 in part.
    let policies = [
        sliding("20/10s", "1s"),
        sliding("20/10s", "100ms"),
        sliding("8/2s,20/10s", "100ms"),
        sliding("8/2s,20/20s", "100ms"),
        sliding("8/2s,20/20s", "1s"),
    ];
    for seed in 20..23 {
        replay(&policies, 300_000, seed).await;
    }
}
