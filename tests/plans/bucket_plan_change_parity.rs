//! Seeded random timelines on one key whose plan changes per call, within
//! one algorithm (capacities and rates drawn per call): the memory twin
//! and the Lua script agree on every field of every decision, checks,
//! peeks and refunds alike, with debts above a smaller plan's capacity and
//! states converted between rates. A failure prints the seed and the step.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Plans of `algo`: capacities 2 to 12, rates whose units divide and do not.
fn plans(algo: &str) -> Vec<Policy> {
    [(3, "1/1s"), (12, "1/1s"), (5, "3/1s"), (2, "7/3s"), (10, "7/3s"), (8, "100/1s")]
        .into_iter()
        .map(|(capacity, rate)| match algo {
            "token_bucket" => Policy::token_bucket(capacity, rate),
            "leaky_bucket" => Policy::leaky_bucket(capacity, rate),
            _ => Policy::gcra(rate, capacity - 1),
        })
        .map(Result::unwrap)
        .collect()
}

/// Gives back `n` permits of the call `of` answered.
async fn refund(limiter: &Limiter, n: u64, of: &Decision) -> Decision {
    limiter.refund("k", n, of).await.unwrap()
}

#[tokio::test]
async fn memory_and_redis_agree_across_plan_changes() {
    let both = BothStores::start().await;
    let (mut decisions, mut denied) = (0, 0);
    for algo in ["token_bucket", "leaky_bucket", "gcra"] {
        let plans = plans(algo);
        for seed in 0..6u64 {
            let name = format!("plans-{algo}-{seed}");
            let on_memory = Limiter::new(name.as_str(), plans[0].clone(), &both.memory).with_deny_cache(false);
            let on_redis = Limiter::new(name.as_str(), plans[0].clone(), &both.redis).with_deny_cache(false);
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut admitted: Vec<Decision> = Vec::new();
            for i in 0..200 {
                both.clock.advance(Duration::from_micros(match rng.random_range(0..4) {
                    0 => 0,
                    1 => rng.random_range(0..20_000),
                    2 => rng.random_range(0..400_000),
                    _ => rng.random_range(0..3_000_000),
                }));
                let plan = &plans[rng.random_range(0..plans.len())];
                let (memory, redis) = (on_memory.with_policy(plan), on_redis.with_policy(plan));
                let cost = [0, 1, 1, 1, 2, 3, 5][rng.random_range(0..7)];
                let (m, r) = match rng.random_range(0..10) {
                    0 | 1 => (memory.peek("k", cost).await.unwrap(), redis.peek("k", cost).await.unwrap()),
                    2 | 3 if !admitted.is_empty() => {
                        let of = admitted.swap_remove(rng.random_range(0..admitted.len()));
                        (refund(&memory, cost, &of).await, refund(&redis, cost, &of).await)
                    }
                    _ => (memory.check("k", cost).await.unwrap(), redis.check("k", cost).await.unwrap()),
                };
                assert_eq!(m, r, "{algo} seed {seed} step {i}: {plan} cost {cost}");
                if m.allowed && cost > 0 {
                    admitted.push(m.clone());
                }
                decisions += 1;
                denied += usize::from(!m.allowed);
            }
        }
    }
    assert!(denied > decisions / 10 && denied < decisions * 9 / 10, "{denied} of {decisions} denied");
    println!("{decisions} decisions ({denied} denied) identical on both stores");
}
