//! Reserve, then settle (`Limiter::reserve`, `Permit::settle`): a table of
//! sequences with the numbers each store must answer, random timelines
//! replayed on both stores (time moving, policies of every algorithm that
//! takes refunds), what a late settlement does once a window moved, dry
//! run, and the algorithms that refuse a reservation.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, DenialReason, Error, Limiter, Permit, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn refundable() -> Vec<Policy> {
    vec![
        Policy::fixed_window("10/1s").unwrap(),
        Policy::fixed_window("6/1s,15/3s").unwrap(),
        Policy::token_bucket(10, "5/1s").unwrap(),
        Policy::token_bucket(8, "7/3s").unwrap(),
        Policy::token_bucket_interval(10, "5/1s").unwrap(),
        Policy::leaky_bucket(10, "5/1s").unwrap(),
        Policy::leaky_bucket(6, "7/3s").unwrap(),
        Policy::gcra("5/1s", 9).unwrap(),
        Policy::gcra("7/3s", 3).unwrap(),
    ]
}

/// The fields a settlement reports, for the table.
fn seen(d: &Decision) -> (bool, u64, Option<Duration>) {
    (d.allowed, d.remaining, d.retry_after)
}

#[tokio::test]
async fn a_table_of_reserve_and_settle_sequences_answers_alike_on_both_stores() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        // Settled below the estimate: the rest comes back.
        let tb = Limiter::new(format!("table-tb-{at}"), Policy::token_bucket(10, "1/1s").unwrap(), store);
        let r = tb.reserve("k", 6).await.unwrap();
        assert_eq!(r.decision().remaining, 4, "{at}");
        assert_eq!(seen(&r.settle(2).await.unwrap()), (true, 8, None), "{at}: 4 of 6 back");
        // Above it: charged past the limit, owed, waited off at the rate.
        let r = tb.reserve("k", 8).await.unwrap();
        assert_eq!(seen(&r.settle(13).await.unwrap()), (false, 0, Some(5 * SECOND)), "{at}: owes 5 past full");
        assert!(tb.reserve("k", 1).await.is_err(), "{at}: owed");
        both.clock.advance(5 * SECOND);
        assert_eq!(seen(&tb.peek("k", 0).await.unwrap()), (true, 0, None), "{at}: paid off, empty");
        // Settled at the estimate: nothing moves.
        both.clock.advance(3 * SECOND);
        let r = tb.reserve("k", 3).await.unwrap();
        assert_eq!(seen(&r.settle(3).await.unwrap()), (true, 0, None), "{at}");
        // Dropped unsettled: the estimate stays taken.
        both.clock.advance(10 * SECOND);
        drop(tb.reserve("k", 4).await.unwrap());
        assert_eq!(tb.peek("k", 0).await.unwrap().remaining, 6, "{at}");

        // A fixed window: the overage counts in the window, past its limit.
        let fw = Limiter::new(format!("table-fw-{at}"), Policy::fixed_window("10/10s").unwrap(), store);
        let r = fw.reserve("k", 4).await.unwrap();
        assert_eq!(seen(&r.settle(12).await.unwrap()), (false, 0, Some(10 * SECOND)), "{at}");
        let r2 = fw.check("k", 1).await.unwrap();
        assert!(!r2.allowed, "{at}: 12 of 10 counted");
        both.clock.advance(10 * SECOND);
        assert_eq!(fw.peek("k", 0).await.unwrap().remaining, 10, "{at}: a window's debt ends with it");

        // gcra: the overage moves the TAT on.
        let g = Limiter::new(format!("table-gcra-{at}"), Policy::gcra("1/1s", 4).unwrap(), store);
        let r = g.reserve("k", 2).await.unwrap();
        assert_eq!(seen(&r.settle(8).await.unwrap()), (false, 0, Some(3 * SECOND)), "{at}: 8 of a tolerance of 5");
        both.clock.advance(3 * SECOND);
        assert_eq!(seen(&g.peek("k", 0).await.unwrap()), (true, 0, None), "{at}: the tolerance full again");
        assert_eq!(g.peek("k", 1).await.unwrap().retry_after, Some(SECOND), "{at}");

        // A leaky bucket, an estimate of 0: the whole actual is charged.
        let lb = Limiter::new(format!("table-lb-{at}"), Policy::leaky_bucket(5, "1/1s").unwrap(), store);
        let r = lb.reserve("k", 0).await.unwrap();
        assert_eq!(seen(&r.settle(3).await.unwrap()), (true, 2, None), "{at}");
    }
}

/// A settlement after the window that counted its reservation ended: its
/// overage counts in the window running at the settlement (the one the
/// reservation's counted in is gone), and what it took too much stays in
/// the ended window, which gives nothing back.
#[tokio::test]
async fn a_late_settlement_charges_the_running_window_and_gives_nothing_from_an_ended_one() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let fw = Limiter::new(format!("late-{at}"), Policy::fixed_window("10/1s").unwrap(), store);
        let over = fw.reserve("k", 5).await.unwrap();
        let under = fw.reserve("k", 5).await.unwrap();
        both.clock.advance(SECOND);
        assert_eq!(over.settle(8).await.unwrap().remaining, 7, "{at}: 3 in the new window");
        assert_eq!(under.settle(1).await.unwrap().remaining, 7, "{at}: nothing back from the ended one");
        // Within its window, the same settlement gives back.
        let under = fw.reserve("k", 5).await.unwrap();
        assert_eq!(under.settle(1).await.unwrap().remaining, 6, "{at}");
    }
}

#[tokio::test]
async fn memory_and_redis_agree_on_random_reserve_and_settle_timelines() {
    let both = BothStores::start().await;
    let (mut settled, mut over, mut denied) = (0, 0, 0);
    for (index, policy) in refundable().into_iter().enumerate() {
        for seed in 0..3u64 {
            let name = format!("settle-parity-{index}-{seed}");
            let on_memory = Limiter::new(name.as_str(), policy.clone(), &both.memory).with_deny_cache(false);
            let on_redis = Limiter::new(name.as_str(), policy.clone(), &both.redis).with_deny_cache(false);
            let mut rng = SmallRng::seed_from_u64(seed * 1000 + index as u64);
            let mut open: Vec<(String, u64, Permit, Permit)> = Vec::new();
            for i in 0..150 {
                both.clock.advance(Duration::from_micros(match rng.random_range(0..4) {
                    0 => 0,
                    1 => rng.random_range(0..100_000),
                    2 => rng.random_range(0..1_000_000),
                    _ => rng.random_range(0..3_000_000),
                }));
                let key = format!("user-{}", rng.random_range(0..2));
                let estimate = rng.random_range(0..6);
                let (memory, redis) = match rng.random_range(0..10) {
                    0..=4 => {
                        let (m, r) = (on_memory.reserve(&key, estimate).await, on_redis.reserve(&key, estimate).await);
                        match (m, r) {
                            (Ok(m), Ok(r)) => {
                                let decided = (m.decision().clone(), r.decision().clone());
                                open.push((key.clone(), estimate, m, r));
                                decided
                            }
                            (Err(m), Err(r)) => {
                                denied += 1;
                                (m.decision().clone(), r.decision().clone())
                            }
                            (m, r) => panic!("{policy}, seed {seed}, step {i}: {m:?} against {r:?}"),
                        }
                    }
                    5..=8 if !open.is_empty() => {
                        let (key, estimate, m, r) = open.swap_remove(rng.random_range(0..open.len()));
                        // Often above the estimate, sometimes past the limit.
                        let actual = rng.random_range(0..estimate + 12);
                        settled += 1;
                        over += usize::from(actual > estimate);
                        let decided = (m.settle(actual).await.unwrap(), r.settle(actual).await.unwrap());
                        assert_eq!(
                            decided.0, decided.1,
                            "{policy}, seed {seed}, step {i}, {key}: {estimate} -> {actual}"
                        );
                        decided
                    }
                    _ => (on_memory.peek(&key, 1).await.unwrap(), on_redis.peek(&key, 1).await.unwrap()),
                };
                assert_eq!(memory, redis, "{policy}, seed {seed}, step {i}, key {key}");
            }
        }
    }
    assert!(settled > 1000 && over > 500 && denied > 100, "{settled} settled ({over} over), {denied} denied");
}

#[tokio::test]
async fn a_dry_run_settles_its_trial_keys_and_leaves_the_enforced_ones_alone() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new(format!("dry-{at}"), Policy::token_bucket(10, "1/1h").unwrap(), store);
        let trial = enforced.clone().with_dry_run(true);
        let r = trial.reserve("k", 4).await.unwrap();
        assert_eq!(r.settle(7).await.unwrap().remaining, 3, "{at}: the trial's own count");
        assert_eq!(enforced.peek("k", 0).await.unwrap().remaining, 10, "{at}: untouched");
        // A reservation the trial would have denied was taken nowhere: nothing to settle.
        let let_through = trial.reserve("k", 5).await.unwrap();
        assert!(!let_through.decision().allowed, "{at}");
        assert_eq!(let_through.settle(9).await.unwrap().remaining, 3, "{at}");
        assert_eq!(trial.peek("k", 0).await.unwrap().remaining, 3, "{at}");
    }
}

#[tokio::test]
async fn sliding_and_concurrency_limiters_refuse_a_reservation_and_other_permits_refuse_a_settlement() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        for policy in [
            Policy::sliding_window("5/1s", "100ms").unwrap(),
            Policy::sliding_log("5/1s").unwrap(),
            Policy::concurrency(2, "30s").unwrap(),
        ] {
            let limiter = Limiter::new(format!("refuse-{at}"), policy.clone(), store);
            let refused = limiter.reserve("k", 1).await.unwrap_err();
            assert_eq!(refused.reason(), DenialReason::Misused, "{at}: {policy}");
            assert!(refused.to_string().contains("takes no reservation"), "{at}: {refused}");
        }
        let held = Limiter::new(format!("held-{at}"), Policy::concurrency(2, "30s").unwrap(), store);
        let permit = held.acquire("k").await.unwrap();
        assert!(matches!(permit.settle(3).await, Err(Error::Misuse(_))), "{at}");
        let spent = Limiter::new(format!("spent-{at}"), Policy::gcra("1/1s", 4).unwrap(), store);
        let permit = spent.acquire("k").await.unwrap();
        assert!(matches!(permit.settle(3).await, Err(Error::Misuse(_))), "{at}");
        assert_eq!(spent.peek("k", 0).await.unwrap().remaining, 4, "{at}: nothing charged");
    }
}

/// The largest settlements are capped, never wrapped: a key owes at most
/// 2^52 units, and a charge never fails.
#[tokio::test]
async fn a_huge_settlement_is_owed_whole_and_never_wraps() {
    let both = BothStores::start().await;
    for policy in refundable() {
        let on_memory = Limiter::new("huge", policy.clone(), &both.memory);
        let on_redis = Limiter::new("huge", policy.clone(), &both.redis);
        for actual in [u64::MAX, 1 << 53, 1 << 40] {
            let (m, r) = (on_memory.reserve("k", 1).await, on_redis.reserve("k", 1).await);
            match (m, r) {
                (Ok(m), Ok(r)) => {
                    let (m, r) = (m.settle(actual).await.unwrap(), r.settle(actual).await.unwrap());
                    assert_eq!(m, r, "{policy}: {actual}");
                    assert!(!m.allowed && m.remaining == 0, "{policy}: {m:?}");
                }
                (Err(m), Err(r)) => assert_eq!(m.decision(), r.decision(), "{policy}"),
                (m, r) => panic!("{policy}: {m:?} against {r:?}"),
            }
        }
        both.clock.advance(Duration::from_secs(3600));
    }
}

/// A settlement applies the policy that reserved; the key keeps what it
/// owes across a plan change of its algorithm, so the next plan waits the
/// overage off, at its own rate.
#[tokio::test]
async fn a_settlement_after_a_plan_change_is_owed_under_the_next_plan() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let plan_a = Limiter::new(format!("plans-{at}"), Policy::token_bucket(10, "10/1m").unwrap(), store);
        let plan_b = plan_a.with_policy(&Policy::token_bucket(5, "5/1m").unwrap());
        let reservation = plan_a.reserve("k", 6).await.unwrap();
        assert_eq!(plan_b.peek("k", 0).await.unwrap().remaining, 0, "{at}: 6 owed, above the smaller capacity");
        reservation.settle(9).await.unwrap();
        // The next plan's first check converts the debt to its rate (a peek would not).
        let owed = plan_b.check("k", 0).await.unwrap();
        assert_eq!((owed.allowed, owed.remaining), (false, 0), "{at}");
        assert_eq!(owed.retry_after, Some(Duration::from_secs(48)), "{at}: 9 owed, 4 past 5, at 5 a minute");
        both.clock.advance(Duration::from_secs(48));
        assert!(plan_b.reserve("k", 1).await.is_err(), "{at}: the next plan's own cost on top");
        both.clock.advance(Duration::from_secs(12));
        assert!(plan_b.reserve("k", 1).await.is_ok(), "{at}");
    }
}
