//! A policy chosen per call (`Limiter::with_policy`) decides exactly as a
//! limiter built with that policy: the same random timelines replayed on a
//! fixed limiter and on a limiter of another policy asked per call with
//! this one, for every algorithm, on the memory store and on Redis, on a
//! client clock (every field) and on Redis's own clock (every field that
//! does not depend on the µs a call reaches Redis).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Policies of every algorithm, as text, so each call can build its own.
const POLICIES: &[&str] = &[
    "fixed_window 3/1s",
    "fixed_window 5/1s,8/3s",
    "sliding_window 5/1s 100ms",
    "sliding_window 6/2s,9/4s 100ms",
    "sliding_log 3/1s",
    "sliding_log 5/1s,8/3s",
    "token_bucket 5 3/1s",
    "token_bucket 10 7/3s",
    "leaky_bucket 5 3/1s",
    "leaky_bucket 10 7/3s",
    "gcra 3/1s 2",
    "gcra 7/3s 0",
];

/// A fresh `Policy` from one line of [`POLICIES`].
fn policy(text: &str) -> Policy {
    let parts: Vec<&str> = text.split(' ').collect();
    match parts[..] {
        ["fixed_window", s] => Policy::fixed_window(s),
        ["sliding_window", s, precision] => Policy::sliding_window(s, precision),
        ["sliding_log", s] => Policy::sliding_log(s),
        ["token_bucket", capacity, rate] => Policy::token_bucket(capacity.parse().unwrap(), rate),
        ["leaky_bucket", capacity, rate] => Policy::leaky_bucket(capacity.parse().unwrap(), rate),
        ["gcra", rate, burst] => Policy::gcra(rate, burst.parse().unwrap()),
        _ => unreachable!("{text}"),
    }
    .unwrap()
}

/// What a decision says whatever the µs it was made at.
fn timeless(d: &Decision) -> (bool, u64, u64, bool, Vec<redlimit::Strategy>) {
    (d.allowed, d.limit, d.remaining, d.retry_after.is_some(), d.violated.clone())
}

async fn replay(store: &Store, label: &str, clock: Option<&redlimit::ManualClock>) -> usize {
    let mut decisions = 0;
    for (index, text) in POLICIES.iter().enumerate() {
        let fixed = Limiter::new(format!("fixed-{index}"), policy(text), store);
        // Its own policy is of another algorithm: every call below names its own.
        let per_call = Limiter::new(format!("per-call-{index}"), Policy::gcra("1/1h", 0).unwrap(), store);
        let mut rng = SmallRng::seed_from_u64(index as u64);
        for step in 0..120 {
            if let Some(clock) = clock {
                clock.advance(Duration::from_micros(rng.random_range(0..400_000)));
            }
            let key = format!("user-{}", rng.random_range(0..3));
            let cost = if rng.random_range(0..6) == 0 { rng.random_range(0..4) } else { 1 };
            let asked = per_call.with_policy(&policy(text));
            let (a, b) = match rng.random_range(0..20) {
                0 => {
                    fixed.reset(&key).await.unwrap();
                    asked.reset(&key).await.unwrap();
                    continue;
                }
                1 | 2 => (fixed.peek(&key, cost).await.unwrap(), asked.peek(&key, cost).await.unwrap()),
                _ => (fixed.check(&key, cost).await.unwrap(), asked.check(&key, cost).await.unwrap()),
            };
            match clock {
                Some(_) => assert_eq!(a, b, "{label}: {text}, step {step}, key {key}, cost {cost}"),
                None => assert_eq!(timeless(&a), timeless(&b), "{label}: {text}, step {step}, key {key}, cost {cost}"),
            }
            assert_eq!(asked.policy(), &policy(text), "the limiter asked says which policy decided");
            decisions += 1;
        }
    }
    decisions
}

#[tokio::test]
async fn a_policy_per_call_decides_as_a_limiter_of_that_policy() {
    let both = BothStores::start().await;
    let mut decisions = replay(&both.memory, "memory", Some(&both.clock)).await;
    decisions += replay(&both.redis, "redis, client clock", Some(&both.clock)).await;
    let server_clock = Store::redis(&both.server.url()).await.unwrap().with_prefix("server-clock");
    decisions += replay(&server_clock, "redis, its own clock", None).await;
    assert!(decisions > 3_000, "replayed {decisions} decisions");
}

/// The deny cache remembers a denial under the policy that gave it: the
/// same key asked under a larger policy is decided by the store at once.
#[tokio::test]
async fn a_remembered_denial_is_not_served_to_another_policy() {
    let both = BothStores::start().await;
    let limiter = Limiter::new("plans", Policy::fixed_window("1/1h").unwrap(), &both.redis);
    let (free, paid) = (Policy::fixed_window("1/1h").unwrap(), Policy::fixed_window("3/1h").unwrap());
    assert!(limiter.with_policy(&free).check("alice", 1).await.unwrap().allowed);
    assert!(!limiter.with_policy(&free).check("alice", 1).await.unwrap().allowed);
    let evalsha = both.server.evalsha_calls().await;
    assert!(!limiter.with_policy(&free).check("alice", 1).await.unwrap().allowed);
    assert_eq!(both.server.evalsha_calls().await, evalsha, "the denial under `free` was remembered");
    let upgraded = limiter.with_policy(&paid).check("alice", 1).await.unwrap();
    assert_eq!((upgraded.allowed, upgraded.remaining), (true, 1), "decided by the store under `paid`");
    assert_eq!(both.server.evalsha_calls().await, evalsha + 1);
}
