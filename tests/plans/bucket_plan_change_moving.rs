//! A bucket's capacity changing on a key, with time moving: one key decided
//! under capacities drawn per call at one rate. What a key owes is kept
//! whole whatever capacity decides next, so every admitted call, replayed
//! against a reference bucket whose debt is never clipped, must fit under
//! the capacity of the call that took it. Both stores on a manual clock
//! advanced per call, and Redis on its own clock, bounded by a count of
//! calls (never by seconds).

use redlimit::{Decision, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::{Duration, UNIX_EPOCH};

/// One token per 2 000 µs: 500 per second.
const RATE: &str = "500/1s";
const PERIOD_US: u64 = 1_000_000;
const COUNT: u64 = 500;

const ALGORITHMS: [&str; 3] = ["token_bucket", "leaky_bucket", "gcra"];

/// The policy of `algo` holding `capacity` at [`RATE`] (gcra: burst + 1).
fn policy(algo: &str, capacity: u64) -> Policy {
    match algo {
        "token_bucket" => Policy::token_bucket(capacity, RATE),
        "leaky_bucket" => Policy::leaky_bucket(capacity, RATE),
        _ => Policy::gcra(RATE, capacity - 1),
    }
    .unwrap()
}

/// An admitted call: when it was judged (µs), its cost and the capacity it was decided under.
type Hit = (u64, u64, u64);

fn micros(d: &Decision) -> u64 {
    d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The admitted calls a reference bucket at [`RATE`] whose debt is never
/// clipped would have denied: sorted by time, the debt is paid off at the
/// rate, and a call fits when the debt plus its cost is within its own
/// capacity. Units: one token is `PERIOD_US` units, `COUNT` paid per µs.
fn over_admitted(hits: &[Hit]) -> Vec<Hit> {
    let mut hits = hits.to_vec();
    // Calls judged in one µs (a batch) could have come in any order: the
    // smaller capacities first is the order under which the most fit.
    hits.sort_by_key(|&(t, _, capacity)| (t, capacity));
    let (mut debt, mut last, mut over) = (0u128, None::<u64>, Vec::new());
    for (t, cost, capacity) in hits {
        if let Some(last) = last {
            debt = debt.saturating_sub((t - last) as u128 * COUNT as u128);
        }
        last = Some(t);
        let need = cost as u128 * PERIOD_US as u128;
        if debt + need > capacity as u128 * PERIOD_US as u128 {
            over.push((t, cost, capacity));
        }
        debt += need;
    }
    over
}

/// `calls` calls on one key of `limiter`, call `i` under `capacities(i)`;
/// `tick` runs before each (advancing a manual clock, or nothing).
async fn run(
    limiter: &Limiter,
    algo: &str,
    calls: usize,
    capacities: impl Fn(usize) -> u64,
    tick: impl Fn(),
) -> Vec<Hit> {
    let plans: Vec<(u64, Limiter)> =
        [20u64, 50, 99, 100].iter().map(|&c| (c, limiter.with_policy(&policy(algo, c)))).collect();
    let mut hits = Vec::new();
    for i in 0..calls {
        tick();
        let capacity = capacities(i);
        let plan = &plans.iter().find(|(c, _)| *c == capacity).unwrap().1;
        let d = plan.check("k", 1).await.unwrap();
        if d.allowed {
            hits.push((micros(&d), 1, capacity));
        }
    }
    hits
}

/// Capacities 20, 50 and 100, drawn per call from a seeded sequence.
fn drawn(i: usize) -> u64 {
    // A fixed linear congruential sequence: the same draws on every run.
    let x = (i as u64).wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407) >> 33;
    [20, 50, 100][(x % 3) as usize]
}

/// A name, and the capacity call `i` is decided under.
type Pattern = (&'static str, fn(usize) -> u64);

const PATTERNS: [Pattern; 3] = [
    ("99/100", |i| if i % 2 == 0 { 99 } else { 100 }),
    ("20/100", |i| if i % 2 == 0 { 20 } else { 100 }),
    ("20/50/100", drawn),
];

#[tokio::test]
async fn capacities_changing_per_call_never_admit_past_the_debt_on_a_moving_clock() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            for (name, capacities) in PATTERNS {
                let limiter =
                    Limiter::new(format!("moving-{algo}-{name}"), policy(algo, 100), store).with_deny_cache(false);
                // A call every 400 µs: five per token, so the bucket runs dry and stays there.
                let hits =
                    run(&limiter, algo, 3_000, capacities, || both.clock.advance(Duration::from_micros(400))).await;
                let over = over_admitted(&hits);
                assert!(
                    over.is_empty(),
                    "{backend} {algo} {name}: {} of {} admitted calls over the debt, first {:?}",
                    over.len(),
                    hits.len(),
                    &over[..over.len().min(5)]
                );
                // 100 at once, then one per 2 000 µs over 1.2 s: about 700.
                assert!(hits.len() > 600, "{backend} {algo} {name}: only {} admitted", hits.len());
            }
        }
    }
}

#[tokio::test]
async fn capacities_changing_per_call_never_admit_past_the_debt_on_redis_clock() {
    let server = RedisServer::start();
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    let store = Store::redis_with(&server.url(), patient).await.unwrap();
    for algo in ALGORITHMS {
        for (name, capacities) in PATTERNS {
            let limiter =
                Limiter::new(format!("server-{algo}-{name}"), policy(algo, 100), &store).with_deny_cache(false);
            let hits = run(&limiter, algo, 3_000, capacities, || {}).await;
            let over = over_admitted(&hits);
            assert!(
                over.is_empty(),
                "redis clock {algo} {name}: {} of {} admitted calls over the debt, first {:?}",
                over.len(),
                hits.len(),
                &over[..over.len().min(5)]
            );
        }
    }
}

/// A debt above the smaller capacity: nothing left, and the retry is when
/// enough of the whole debt is paid off, on both stores.
#[tokio::test]
async fn a_debt_above_the_capacity_reports_nothing_left_and_retries_when_paid_off() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            let large = Limiter::new(format!("owed-{algo}"), policy(algo, 100), store).with_deny_cache(false);
            let small = large.with_policy(&policy(algo, 20));
            assert!(large.check("k", 100).await.unwrap().allowed, "{backend} {algo}");
            // 100 tokens owed, 81 to pay off before one fits under 20: 162 ms.
            let denied = small.check("k", 1).await.unwrap();
            assert_eq!(
                (denied.allowed, denied.limit, denied.remaining),
                (false, 20, 0),
                "{backend} {algo}: {denied:?}"
            );
            assert_eq!(denied.retry_after, Some(Duration::from_millis(162)), "{backend} {algo}: {denied:?}");
            assert_eq!(denied.reset_after, Duration::from_millis(200), "{backend} {algo}: the whole debt");
            both.clock.advance(Duration::from_micros(161_999));
            let early = small.check("k", 1).await.unwrap();
            assert!(!early.allowed, "{backend} {algo}: 1 µs early: {early:?}");
            assert_eq!(early.retry_after, Some(Duration::from_micros(1)), "{backend} {algo}");
            both.clock.advance(Duration::from_micros(1));
            let on_time = small.check("k", 1).await.unwrap();
            assert_eq!((on_time.allowed, on_time.remaining), (true, 0), "{backend} {algo}: {on_time:?}");
            // The debt stayed whole: the larger plan finds 20 owed after it, room for 80.
            let after = large.peek("k", 0).await.unwrap();
            assert_eq!(after.remaining, 80, "{backend} {algo}: {after:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_drawing_capacities_never_admit_past_the_debt_on_redis_clock() {
    let server = RedisServer::start();
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    let store = Store::redis_with(&server.url(), patient).await.unwrap();
    for algo in ALGORITHMS {
        let limiter = Limiter::new(format!("tasks-{algo}"), policy(algo, 100), &store).with_deny_cache(false);
        // 8 tasks × 300 calls on one key, each call's capacity drawn apart from the others'.
        let tasks: Vec<_> = (0..8usize)
            .map(|task| {
                let (limiter, algo) = (limiter.clone(), algo.to_string());
                tokio::spawn(async move { run(&limiter, &algo, 300, move |i| drawn(i * 8 + task), || {}).await })
            })
            .collect();
        let mut hits = Vec::new();
        for task in tasks {
            hits.extend(task.await.unwrap());
        }
        let over = over_admitted(&hits);
        assert!(
            over.is_empty(),
            "redis clock, 8 tasks, {algo}: {} of {} admitted calls over the debt, first {:?}",
            over.len(),
            hits.len(),
            &over[..over.len().min(5)]
        );
    }
}
