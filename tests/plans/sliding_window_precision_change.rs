//! A sliding window keeps its counts across a change of precision, on both
//! stores: a call under another precision first moves each counted
//! sub-window to the new sub-window holding its last microsecond, so a
//! permit counts as taken no earlier than it was, and nothing is admitted
//! that the window still counts.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::{Duration, UNIX_EPOCH};

const LIMIT: u64 = 100;
/// The manual clock's start: a whole minute.
const T0: u64 = 1_767_225_600_000_000;

fn window(strategy: &str, precision_us: u64) -> Policy {
    Policy::sliding_window(strategy, &format!("{precision_us}us")).unwrap()
}

/// Checks of cost 1 until one is denied: how many were admitted.
async fn take_all(limiter: &Limiter, key: &str) -> u64 {
    let mut admitted = 0;
    while limiter.check(key, 1).await.unwrap().allowed {
        admitted += 1;
        assert!(admitted <= LIMIT, "more than the limit admitted at once");
    }
    admitted
}

/// From now on, every quarter second until `until_s` (seconds from the
/// clock's start), takes all it can: when the first admission came (in
/// milliseconds from the start) and how many it took.
async fn first_admission(both: &BothStores, limiter: &Limiter, key: &str, until_s: u64) -> Option<(u64, u64)> {
    loop {
        let now_us = redlimit::Clock::now_us(&both.clock).unwrap();
        let taken = take_all(limiter, key).await;
        if taken > 0 {
            return Some(((now_us - T0) / 1000, taken));
        }
        if now_us - T0 >= until_s * 1_000_000 {
            return None;
        }
        both.clock.advance(Duration::from_millis(250));
    }
}

/// 100/1m counted at 1s, full at 59.5s (sub-window 59, which counts until
/// 119s at 1s). At 6s it becomes sub-window 9 (54s..60s, counted until
/// 114s); at 30s, sub-window 1 (30s..60s, until 90s): each precision frees
/// it when a permit taken at 59.999999s would leave, and not a moment
/// before. Back at 1s, what the new precision admitted (in its sub-window
/// ending at 120s) counts as taken at 119.999999s: until 179s.
#[tokio::test]
async fn a_full_window_admits_nothing_at_another_precision_until_its_permits_leave() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for (other, freed_ms) in [(6_000_000u64, 114_000u64), (30_000_000, 90_000)] {
            both.clock.set_us(T0);
            let fine = Limiter::new("precision", window("100/1m", 1_000_000), store).with_deny_cache(false);
            let coarse = fine.with_policy(&window("100/1m", other));
            let key = format!("full-{other}");
            both.clock.advance(Duration::from_millis(59_500));
            assert_eq!(take_all(&fine, &key).await, LIMIT, "{backend}");
            let at_other = first_admission(&both, &coarse, &key, 200).await;
            assert_eq!(at_other, Some((freed_ms, LIMIT)), "{backend}, {other} µs: when and how many");
            let back = first_admission(&both, &fine, &key, 300).await;
            assert_eq!(back, Some((179_000, LIMIT)), "{backend}, back at 1s after {other} µs");
        }
    }
}

/// The window counts sub-windows, so over a change of precision as at one
/// precision it may admit `limit` again once `window - precision` has gone
/// by: in every closed interval of that length, the coarsest precision in
/// use taken as the precision, at most `limit` permits were admitted (by
/// the times the decisions report).
fn over_admissions(admitted: &mut [(u64, u64)], span_us: u64, limit: u64) -> usize {
    admitted.sort_unstable();
    let (mut over, mut from, mut sum) = (0, 0, 0);
    for to in 0..admitted.len() {
        sum += admitted[to].1;
        while admitted[to].0 - admitted[from].0 > span_us {
            sum -= admitted[from].1;
            from += 1;
        }
        over += usize::from(sum > limit);
    }
    over
}

fn decided_us(decision: &Decision) -> u64 {
    decision.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// A seeded run on a manual clock: each call under a precision drawn from
/// `precisions`, time moving mostly by steps well within a sub-window,
/// sometimes by a few sub-windows or whole windows; the stores answer
/// alike, and no strategy (limit, window µs) over-admits in any interval.
/// Returns how many calls were admitted, and how many not (peeks included).
async fn replay(both: &BothStores, strategies: &[(u64, u64)], precisions: &[u64], seed: u64) -> (usize, usize) {
    let coarsest = *precisions.iter().max().unwrap();
    let name = format!("random-{seed}");
    let spec: Vec<String> = strategies.iter().map(|(limit, window_us)| format!("{limit}/{window_us}us")).collect();
    let limiters: Vec<(Limiter, Limiter)> = precisions
        .iter()
        .map(|&p| {
            let policy = window(&spec.join(","), p);
            let memory = Limiter::new(name.as_str(), policy.clone(), &both.memory).with_deny_cache(false);
            (memory, Limiter::new(name.as_str(), policy, &both.redis).with_deny_cache(false))
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut admitted, mut denied) = (Vec::new(), 0);
    for step in 0..2_000 {
        let by = match rng.random_range(0..1000) {
            0..=4 => rng.random_range(0..120_000_000),
            5..=24 => rng.random_range(0..2 * coarsest),
            25..=300 => 0,
            _ => rng.random_range(0..300_000),
        };
        both.clock.advance(Duration::from_micros(by));
        let which = rng.random_range(0..precisions.len());
        let (on_memory, on_redis) = &limiters[which];
        let cost = if rng.random_range(0..5) == 0 { rng.random_range(2..9) } else { 1 };
        let peek = rng.random_range(0..10) == 0;
        let (memory, redis) = if peek {
            (on_memory.peek("k", cost).await.unwrap(), on_redis.peek("k", cost).await.unwrap())
        } else {
            (on_memory.check("k", cost).await.unwrap(), on_redis.check("k", cost).await.unwrap())
        };
        assert_eq!(memory, redis, "seed {seed}, step {step}, precision {} µs", precisions[which]);
        if memory.allowed && !peek {
            admitted.push((decided_us(&memory), cost));
        } else {
            denied += 1;
        }
    }
    for &(limit, window_us) in strategies {
        let over = over_admissions(&mut admitted, window_us - coarsest, limit);
        assert_eq!(over, 0, "seed {seed}, {limit}/{window_us}us at {precisions:?} µs: {over} over-admissions");
    }
    (admitted.len(), denied)
}

#[tokio::test]
async fn random_changes_of_precision_never_over_admit_and_the_stores_agree() {
    let both = BothStores::start().await;
    let (mut admitted, mut denied) = (0, 0);
    const S: u64 = 1_000_000;
    let minute: &[(u64, u64)] = &[(LIMIT, 60 * S)];
    // Strategies as (limit, window µs), and the precisions drawn among.
    type Set<'a> = (&'a [(u64, u64)], &'a [u64]);
    let sets: [Set<'_>; 5] = [
        (minute, &[S, 6 * S]),
        (minute, &[S, 6 * S, 30 * S]),
        (minute, &[S / 10, S, 6 * S]),
        // Sub-windows that do not nest.
        (minute, &[4 * S, 6 * S]),
        (&[(30, 10 * S), (LIMIT, 60 * S)], &[S, 2 * S, 5 * S]),
    ];
    // A longer run: SLIDING_PRECISION_SEEDS=<seeds per set>.
    let seeds = std::env::var("SLIDING_PRECISION_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3u64);
    for (index, (strategies, precisions)) in sets.iter().enumerate() {
        for seed in 0..seeds {
            let (a, d) = replay(&both, strategies, precisions, index as u64 * 1_000_000 + seed).await;
            admitted += a;
            denied += d;
        }
    }
    assert!(admitted > 2_000 && denied > 2_000, "one-sided timelines: {admitted} admitted, {denied} denied");
    println!("{} decisions on each store, {admitted} admitted, 0 over-admissions", admitted + denied);
}

/// The clock moving on its own (this process's on the memory store,
/// Redis's on Redis), tasks on one key each drawing a precision per call:
/// bounded by the number of calls, however fast they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_time_moving_changes_of_precision_never_over_admit() {
    let server = RedisServer::start();
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    let redis = Store::redis_with(&server.url(), patient).await.unwrap();
    for (backend, store) in [("memory", Store::memory()), ("redis", redis)] {
        // 100 per 600ms, in sub-windows of 10ms, 60ms or 300ms.
        let precisions = [10_000u64, 60_000, 300_000];
        let limiter = Limiter::new("moving", window("100/600ms", precisions[0]), &store).with_deny_cache(false);
        let mut tasks = Vec::new();
        for task in 0..4u64 {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(task);
                let mut admitted = Vec::new();
                for _ in 0..1_500 {
                    let policy = window("100/600ms", precisions[rng.random_range(0..precisions.len())]);
                    let decision = limiter.with_policy(&policy).check("k", 1).await.unwrap();
                    if decision.allowed {
                        admitted.push((decided_us(&decision), 1));
                    }
                }
                admitted
            }));
        }
        let mut admitted = Vec::new();
        for task in tasks {
            admitted.extend(task.await.unwrap());
        }
        assert!(admitted.len() as u64 >= LIMIT, "{backend}: the first {LIMIT} calls are admitted");
        let over = over_admissions(&mut admitted, 600_000 - 300_000, LIMIT);
        assert_eq!(over, 0, "{backend}: {over} over-admissions in {} admitted", admitted.len());
    }
}
