//! Seeded random timelines replayed on both backends for every algorithm:
//! the memory twin and the Lua script must agree on every field of every
//! decision, refunds' answers included. A failure prints the seed, the step
//! and both decisions.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{AlgorithmKind, Decision, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

fn policies() -> Vec<Policy> {
    vec![
        Policy::fixed_window("3/1s").unwrap(),
        Policy::fixed_window("5/1s,8/3s").unwrap(),
        Policy::fixed_window("2/100ms,4/1s,6/2s").unwrap(),
        Policy::sliding_window("5/1s", "100ms").unwrap(),
        Policy::sliding_window("4/1s,10/5s", "500ms").unwrap(),
        Policy::sliding_window("3/300ms", "100ms").unwrap(),
        // 20 sub-windows of the ring on Redis.
        Policy::sliding_window("6/2s,9/4s", "100ms").unwrap(),
        Policy::sliding_log("3/1s").unwrap(),
        Policy::sliding_log("5/1s,8/3s").unwrap(),
        Policy::sliding_log("2/250ms,5/1s").unwrap(),
        // Costs up to 11 against these: a denial's retry bisects weighted entries.
        Policy::sliding_log("20/1s,45/3s").unwrap(),
        Policy::token_bucket(3, "1/1s").unwrap(),
        Policy::token_bucket(5, "3/1s").unwrap(),
        Policy::token_bucket(10, "7/3s").unwrap(),
        Policy::token_bucket_interval(3, "1/1s").unwrap(),
        Policy::token_bucket_interval(5, "3/1s").unwrap(),
        Policy::token_bucket_interval(10, "7/3s").unwrap(),
        Policy::leaky_bucket(3, "1/1s").unwrap(),
        Policy::leaky_bucket(5, "3/1s").unwrap(),
        Policy::leaky_bucket(10, "7/3s").unwrap(),
        Policy::gcra("1/1s", 4).unwrap(),
        Policy::gcra("3/1s", 2).unwrap(),
        Policy::gcra("7/3s", 0).unwrap(),
    ]
}

/// The next time step: often a boundary the previous decision named.
fn step(rng: &mut SmallRng, last: Option<&Decision>) -> Duration {
    let retry = last.and_then(|d| d.retry_after);
    let reset = last.map(|d| d.reset_after);
    match rng.random_range(0..10) {
        0 => Duration::ZERO,
        1 => Duration::from_micros(1),
        2 | 3 => Duration::from_micros(rng.random_range(0..50_000)),
        4 | 5 => Duration::from_micros(rng.random_range(0..1_500_000)),
        6 => retry.unwrap_or_default(),
        7 => retry.map_or(Duration::ZERO, |r| r.saturating_sub(Duration::from_micros(1))),
        8 => reset.unwrap_or_default(),
        _ => Duration::from_micros(rng.random_range(0..5_000_000)),
    }
}

#[tokio::test]
async fn memory_and_redis_agree_on_random_timelines() {
    replay(false).await;
}

/// Server clocks can step back (a failover to a host whose clock is behind);
/// both backends must still agree.
#[tokio::test]
async fn memory_and_redis_agree_when_the_clock_steps_back() {
    replay(true).await;
}

async fn replay(steps_back: bool) {
    let both = BothStores::start().await;
    let (mut decisions, mut denied, mut refunds) = (0, 0, 0);
    for (index, policy) in policies().into_iter().enumerate() {
        let refunding = !matches!(policy.algorithm(), AlgorithmKind::SlidingWindow | AlgorithmKind::SlidingLog);
        for seed in 0..4u64 {
            let name = format!("parity-{index}-{seed}");
            // The backends are compared, not the in-process deny cache (its
            // own tests are in limiter/deny_cache.rs).
            let on_memory = Limiter::new(name.as_str(), policy.clone(), &both.memory).with_deny_cache(false);
            let on_redis = Limiter::new(name.as_str(), policy.clone(), &both.redis).with_deny_cache(false);
            let mut rng = SmallRng::seed_from_u64(seed * 1000 + index as u64);
            let mut last: Option<Decision> = None;
            // Per key, its admitted calls: what a refund names, late or not.
            let mut admitted: [Vec<Decision>; 3] = Default::default();
            for i in 0..150 {
                if steps_back && rng.random_range(0..8) == 0 {
                    let now = redlimit::Clock::now_us(&both.clock).unwrap();
                    both.clock.set_us(now - rng.random_range(0..2_000_000));
                } else {
                    both.clock.advance(step(&mut rng, last.as_ref()));
                }
                let user = rng.random_range(0..3);
                let key = format!("user-{user}");
                let cost = match rng.random_range(0..10) {
                    0 => 0,
                    1 => rng.random_range(2..5),
                    2 => rng.random_range(5..12),
                    _ => 1,
                };
                let (memory, redis) = match rng.random_range(0..20) {
                    0 => {
                        on_memory.reset(&key).await.unwrap();
                        on_redis.reset(&key).await.unwrap();
                        continue;
                    }
                    1 | 2 => (on_memory.peek(&key, cost).await.unwrap(), on_redis.peek(&key, cost).await.unwrap()),
                    3..=5 if refunding && !admitted[user].is_empty() => {
                        refunds += 1;
                        let of = &admitted[user][rng.random_range(0..admitted[user].len())];
                        (
                            on_memory.refund(&key, cost, of).await.unwrap(),
                            on_redis.refund(&key, cost, of).await.unwrap(),
                        )
                    }
                    _ => {
                        let decided =
                            (on_memory.check(&key, cost).await.unwrap(), on_redis.check(&key, cost).await.unwrap());
                        if decided.0.allowed && cost > 0 {
                            admitted[user].push(decided.0.clone());
                        }
                        decided
                    }
                };
                // Every field, the per-strategy quotas included.
                assert_eq!(memory, redis, "{policy}, seed {seed}, step {i}, key {key}, cost {cost}");
                let strategies = policy.strategies().len();
                assert_eq!(memory.quotas.len(), if strategies > 1 { strategies } else { 0 }, "{policy}");
                decisions += 1;
                denied += usize::from(!memory.allowed);
                last = Some(memory);
            }
        }
    }
    assert!(decisions > 10_000, "replayed only {decisions} decisions");
    assert!(
        denied > decisions / 10 && denied < decisions * 9 / 10,
        "timelines too one-sided: {denied} of {decisions} denied"
    );
    assert!(refunds > 800, "replayed only {refunds} refunds");
    println!("{decisions} decisions ({denied} denied, {refunds} refunds) identical on both backends");
}
