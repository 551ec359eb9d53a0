//! A key's state across a change of its policy, under concurrency: tasks on
//! one key each pick one of several plans per call (the same algorithm and
//! rate, other limits), so the plan changes between nearly every two calls.
//! With time frozen, an admitted call's count after it is `limit -
//! remaining`; over every admitted call those counts must be exactly 1, 2,
//! ..., N: each call counted once, the count carried across every change
//! (a plan never starts from zero), and no call admitted past the limit of
//! the plan it was decided under. A change of algorithm starts afresh.

use redlimit::{Clock, Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;
use std::collections::BTreeSet;
use std::time::Duration;

/// Three plans of one algorithm: limits 4, 9 and 6 (a window's limit, a
/// bucket's capacity, gcra's burst + 1).
fn plans(algo: &str) -> [Policy; 3] {
    [4u64, 9, 6].map(|limit| match algo {
        "fixed_window" => Policy::fixed_window(&format!("{limit}/1h,{}/1d", limit * 3)).unwrap(),
        "sliding_window" => Policy::sliding_window(&format!("{limit}/1h"), "6m").unwrap(),
        "sliding_log" => Policy::sliding_log(&format!("{limit}/1h")).unwrap(),
        "token_bucket" => Policy::token_bucket(limit, "1/1h").unwrap(),
        "leaky_bucket" => Policy::leaky_bucket(limit, "1/1h").unwrap(),
        _ => Policy::gcra("1/1h", limit - 1).unwrap(),
    })
}

const ALGORITHMS: [&str; 6] = ["fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"];

/// 8 tasks × 40 calls on one key, each call under the plan its index picks.
async fn run(store: &Store, algo: &str) -> Vec<u64> {
    let limiter = Limiter::new(format!("plans-{algo}"), plans(algo)[0].clone(), store).with_deny_cache(false);
    let mut tasks = Vec::new();
    for task in 0..8usize {
        let limiter = limiter.clone();
        let algo = algo.to_string();
        tasks.push(tokio::spawn(async move {
            let plans = plans(&algo);
            let mut counts = Vec::new();
            for call in 0..40usize {
                let decision = limiter.with_policy(&plans[(task + call) % 3]).check("k", 1).await.unwrap();
                if decision.allowed {
                    assert!(decision.remaining < decision.limit, "{algo}: an admitted call counts");
                    counts.push(decision.limit - decision.remaining);
                }
            }
            counts
        }));
    }
    let mut counts = Vec::new();
    for task in tasks {
        counts.extend(task.await.unwrap());
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_counted_once_across_plan_changes_and_none_past_its_plan() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let counts = run(store, algo).await;
            let admitted = counts.len() as u64;
            let distinct: BTreeSet<u64> = counts.iter().copied().collect();
            assert_eq!(distinct.len() as u64, admitted, "{backend} {algo}: a count seen twice: {counts:?}");
            assert_eq!(distinct, (1..=admitted).collect(), "{backend} {algo}: counts {counts:?}");
            // The largest plan admits 9, and only while the count is below 9.
            assert_eq!(admitted, 9, "{backend} {algo}: admitted {admitted}");
        }
    }
}

#[tokio::test]
async fn another_algorithm_starts_afresh_and_leaves_the_old_state() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let limiter = Limiter::new("switch", Policy::fixed_window("3/1h").unwrap(), store);
        for _ in 0..3 {
            assert!(limiter.check("k", 1).await.unwrap().allowed);
        }
        let bucket = limiter.with_policy(&Policy::token_bucket(3, "1/1h").unwrap());
        assert_eq!(bucket.check("k", 1).await.unwrap().remaining, 2, "{backend}: a fresh bucket");
        assert!(!limiter.check("k", 1).await.unwrap().allowed, "{backend}: the window kept its count");
    }
}

#[tokio::test]
async fn a_window_policy_gaining_strategies_keeps_each_kept_strategys_count() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let one = Limiter::new("strategies", Policy::fixed_window("3/1h").unwrap(), store);
        let two = one.with_policy(&Policy::fixed_window("3/1h,5/1d").unwrap());
        let remaining =
            |d: redlimit::Decision| (d.allowed, d.remaining, d.quotas.iter().map(|q| q.remaining).collect());
        assert_eq!(remaining(one.check("k", 1).await.unwrap()), (true, 2, vec![]), "{backend}");
        // The first strategy's window carries its count; the new one starts with this call.
        assert_eq!(remaining(two.check("k", 1).await.unwrap()), (true, 1, vec![1, 4]), "{backend}");
        // Back to one strategy: its window still holds both calls, and the
        // day's window, which it lacks, counts this call too while it runs.
        assert_eq!(remaining(one.check("k", 1).await.unwrap()), (true, 0, vec![]), "{backend}");
        assert_eq!(remaining(two.check("k", 1).await.unwrap()), (false, 0, vec![0, 3]), "{backend}");
    }
}

/// 90 calls under 10/1s,100/1h, then 10 under 10/1s, then the first policy
/// again: the hour's window, which 10/1s lacks, counted those 10 (not
/// judged by it), so the hour admits 100 in all. Each second's window
/// ends by `next_second(round)`.
async fn an_hour_through_a_policy_lacking_it(
    both: &Limiter,
    one: &Limiter,
    mut next_second: impl AsyncFnMut(usize),
) -> (usize, usize) {
    let (mut before, mut after) = (0, 0);
    for round in 0..20 {
        let limiter = if round == 9 { one } else { both };
        for _ in 0..10 {
            let passed = usize::from(limiter.check("k", 1).await.unwrap().allowed);
            if round < 10 {
                before += passed
            } else {
                after += passed
            }
        }
        next_second(round).await;
    }
    (before, after)
}

#[tokio::test]
async fn a_window_the_policy_lacks_counts_every_call_while_it_runs() {
    let stores = BothStores::start().await;
    for (backend, store) in stores.each() {
        let both = Limiter::new("lacks", Policy::fixed_window("10/1s,100/1h").unwrap(), store).with_deny_cache(false);
        let one = both.with_policy(&Policy::fixed_window("10/1s").unwrap());
        let start = stores.clock.now_us().unwrap();
        // After 10/1s, a pause past its window and a client clock's slack:
        // the key outlives them while the hour's window runs, on both stores.
        let second = async |round| stores.clock.advance(Duration::from_secs(if round == 9 { 300 } else { 1 }));
        let (before, after) = an_hour_through_a_policy_lacking_it(&both, &one, second).await;
        assert!(stores.clock.now_us().unwrap() - start < 3_600_000_000, "the run fits the hour");
        assert_eq!(before, 100, "{backend}: 90 under both strategies, 10 under one");
        assert_eq!(after, 0, "{backend}: the hour's 100 were spent, 10 of them under 10/1s");
    }
}

/// Fixed-window plans one key meets, each call under one drawn at random:
/// strategies gained and lost, windows that grow and shrink.
fn window_plans() -> [Policy; 5] {
    ["10/1s,100/1m", "10/1s", "4/2s,30/1m,60/1h", "10/2s", "6/500ms,20/5s"].map(|p| Policy::fixed_window(p).unwrap())
}

/// Seeded timelines of checks, peeks and late refunds, each under a plan
/// drawn per call, with steps past windows, TTLs and the client clock's
/// slack: both stores give the same decision every time.
#[tokio::test]
async fn memory_and_redis_agree_as_window_plans_change() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let stores = BothStores::start().await;
    let plans = window_plans();
    let mut decisions = 0;
    for seed in 0..6u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let name = format!("agree{seed}");
        let on = |store| Limiter::new(name.clone(), plans[0].clone(), store).with_deny_cache(false);
        let (memory, redis) = (on(&stores.memory), on(&stores.redis));
        let mut admitted = Vec::new();
        for step in 0..400 {
            let plan = &plans[rng.random_range(0..plans.len())];
            let (memory, redis) = (memory.with_policy(plan), redis.with_policy(plan));
            let cost = rng.random_range(0..4);
            let (m, r) = match rng.random_range(0..10) {
                0 => (memory.peek("k", cost).await.unwrap(), redis.peek("k", cost).await.unwrap()),
                1 if !admitted.is_empty() => {
                    let of = &admitted[rng.random_range(0..admitted.len())];
                    (memory.refund("k", cost, of).await.unwrap(), redis.refund("k", cost, of).await.unwrap())
                }
                _ => (memory.check("k", cost).await.unwrap(), redis.check("k", cost).await.unwrap()),
            };
            assert_eq!(m, r, "seed {seed}, step {step}, {plan}, cost {cost}");
            if m.allowed && cost > 0 {
                admitted.push(m);
            }
            decisions += 1;
            let us = match rng.random_range(0..10) {
                0..=3 => rng.random_range(0..50_000),
                4..=7 => rng.random_range(0..1_500_000),
                8 => rng.random_range(0..10_000_000),
                _ => rng.random_range(0..90_000_000),
            };
            stores.clock.advance(Duration::from_micros(us));
        }
    }
    assert_eq!(decisions, 2_400);
}

/// A window full under 10/1s, then only denied under 10/1h: the hour runs
/// from the window's start, past the second and a client clock's slack,
/// on both stores.
#[tokio::test]
async fn a_full_window_denied_under_a_longer_one_runs_to_the_longer_end() {
    let stores = BothStores::start().await;
    let short = Policy::fixed_window("10/1s").unwrap();
    for long in ["10/1h", "10/1h,20/1d"] {
        let long = Policy::fixed_window(long).unwrap();
        for (backend, store) in stores.each() {
            let limiter = Limiter::new(format!("full{long}"), short.clone(), store).with_deny_cache(false);
            assert!(limiter.check("k", 10).await.unwrap().allowed);
            let mut admitted = 0;
            for _ in 0..30 {
                admitted += usize::from(limiter.with_policy(&long).check("k", 1).await.unwrap().allowed);
                stores.clock.advance(Duration::from_secs(30));
            }
            assert_eq!(admitted, 0, "{backend}: {long} within 15 minutes of the window's start");
        }
    }
}
