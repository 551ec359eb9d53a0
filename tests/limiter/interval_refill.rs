//! A token bucket refilled by interval (`refill = "interval"`): its rate's
//! whole count comes back at once when a period ends, none before, never
//! above capacity; periods are counted on the clock from the epoch. The
//! refill edges on both stores, which must give the same decisions.
//!
//! bucket4j's interval refill is the reference: a bucket of 10 refilled
//! "10 per minute intervally" lends nothing back during the minute and all
//! ten when it ends, where its greedy refill would hand one back every six
//! seconds. bucket4j counts the minutes from the bucket's creation; here
//! they are the clock's, so every key refills at the same instants and a
//! store keeps nothing more than a continuous bucket keeps.

use redlimit::{Decision, Limiter, ManualClock, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// 2026-01-01 00:00:00 UTC: a minute's start.
const MINUTE_START_US: u64 = 1_767_225_600_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Runs `scenario` on each store from the same minute's start, and checks
/// both answered every call alike.
async fn on_both<F, Fut>(name: &str, scenario: F)
where
    F: Fn(Limiter, ManualClock, &'static str) -> Fut,
    Fut: std::future::Future<Output = Vec<Decision>>,
{
    let both = BothStores::start().await;
    let mut answers = Vec::new();
    for (backend, store) in both.each() {
        both.clock.set_us(MINUTE_START_US);
        let limiter = Limiter::new(name, interval(10, "10/1m"), store).with_deny_cache(false);
        answers.push(scenario(limiter, both.clock.clone(), backend).await);
    }
    assert_eq!(answers[0], answers[1], "{name}: memory and Redis differ");
}

fn interval(capacity: u64, rate: &str) -> Policy {
    Policy::token_bucket_interval(capacity, rate).unwrap()
}

#[tokio::test]
async fn bucket4j_scenario_ten_a_minute_come_back_at_once_when_the_minute_ends() {
    on_both("bucket4j", |limiter, clock, backend| async move {
        let mut seen = Vec::new();
        let all = limiter.check("k", 10).await.unwrap();
        assert_eq!((all.allowed, all.remaining, all.reset_after), (true, 0, secs(60)), "{backend}");
        // A continuous bucket would hold 5 again after 30 s; this one holds none.
        clock.advance(secs(30));
        let half = limiter.check("k", 1).await.unwrap();
        assert_eq!((half.allowed, half.retry_after, half.reset_after), (false, Some(secs(30)), secs(30)), "{backend}");
        clock.advance(secs(30) - Duration::from_micros(1));
        let just_before = limiter.check("k", 1).await.unwrap();
        assert_eq!(just_before.retry_after, Some(Duration::from_micros(1)), "{backend}: 1 µs before the end");
        clock.advance(Duration::from_micros(1));
        let at_end = limiter.check("k", 1).await.unwrap();
        assert_eq!((at_end.allowed, at_end.remaining, at_end.reset_after), (true, 9, secs(60)), "{backend}");
        seen.extend([all, half, just_before, at_end]);
        seen
    })
    .await;
}

#[tokio::test]
async fn periods_are_the_clocks_a_first_call_midway_refills_at_the_minutes_end() {
    on_both("midway", |limiter, clock, backend| async move {
        clock.advance(secs(45));
        let taken = limiter.check("k", 4).await.unwrap();
        assert_eq!((taken.remaining, taken.reset_after), (6, secs(15)), "{backend}: back at the minute's end");
        clock.advance(secs(15));
        let refilled = limiter.peek("k", 0).await.unwrap();
        assert_eq!((refilled.remaining, refilled.reset_after), (10, Duration::ZERO), "{backend}");
        vec![taken, refilled]
    })
    .await;
}

#[tokio::test]
async fn several_periods_at_once_refill_each_periods_count_up_to_capacity() {
    on_both("several", |limiter, clock, backend| async move {
        let limiter = limiter.with_policy(&interval(10, "4/1m"));
        limiter.check("k", 10).await.unwrap();
        // Owing 10 at 4 a minute: full at the third minute's end.
        let owing = limiter.peek("k", 0).await.unwrap();
        assert_eq!(owing.reset_after, secs(180), "{backend}");
        clock.advance(secs(60));
        let one = limiter.check("k", 1).await.unwrap();
        assert_eq!((one.remaining, one.reset_after), (3, secs(120)), "{backend}: 4 came, 1 taken");
        clock.advance(secs(5 * 60));
        let capped = limiter.peek("k", 0).await.unwrap();
        assert_eq!(capped.remaining, 10, "{backend}: five minutes' 20 tokens, capped at 10");
        let more = limiter.check("k", 10).await.unwrap();
        assert!(more.allowed, "{backend}");
        let none = limiter.check("k", 1).await.unwrap();
        assert_eq!((none.allowed, none.retry_after), (false, Some(secs(60))), "{backend}");
        vec![owing, one, capped, more, none]
    })
    .await;
}

#[tokio::test]
async fn a_cost_above_capacity_never_passes_and_names_no_retry() {
    on_both("never", |limiter, clock, backend| async move {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let denied = limiter.check("k", 11).await.unwrap();
            assert_eq!((denied.allowed, denied.retry_after, denied.remaining), (false, None, 10), "{backend}");
            seen.push(denied);
            clock.advance(secs(600));
        }
        seen
    })
    .await;
}

#[tokio::test]
async fn a_peek_takes_nothing_and_names_the_periods_end() {
    on_both("peek", |limiter, clock, backend| async move {
        limiter.check("k", 10).await.unwrap();
        clock.advance(secs(59));
        let denied = limiter.peek("k", 1).await.unwrap();
        assert_eq!((denied.allowed, denied.retry_after), (false, Some(secs(1))), "{backend}");
        clock.advance(secs(1));
        let would = limiter.peek("k", 3).await.unwrap();
        assert_eq!((would.allowed, would.remaining), (true, 7), "{backend}: as if taken");
        let taken = limiter.check("k", 1).await.unwrap();
        assert_eq!(taken.remaining, 9, "{backend}: the peeks took nothing");
        vec![denied, would, taken]
    })
    .await;
}

#[tokio::test]
async fn a_refund_gives_back_within_the_period_and_nothing_a_refill_already_paid() {
    on_both("refunds", |limiter, clock, backend| async move {
        let limiter = limiter.with_policy(&interval(20, "10/1m"));
        limiter.check("k", 15).await.unwrap();
        clock.advance(secs(50));
        let late_call = limiter.check("k", 5).await.unwrap();
        assert_eq!(late_call.remaining, 0, "{backend}");
        clock.advance(secs(20));
        // The minute's end paid 10 tokens since that call: its 5 are paid
        // off, where a continuous pace over 20 s would leave some to give back.
        let after_refill = limiter.refund("k", 5, &late_call).await.unwrap();
        assert_eq!(after_refill.remaining, 10, "{backend}: {after_refill:?}");
        let in_period = limiter.check("k", 5).await.unwrap();
        clock.advance(secs(5));
        let refunded = limiter.refund("k", 5, &in_period).await.unwrap();
        assert_eq!((refunded.remaining, refunded.reset_after), (10, secs(45)), "{backend}: all of it back");
        vec![late_call, after_refill, in_period, refunded]
    })
    .await;
}

#[tokio::test]
async fn a_plan_change_keeps_the_debt_and_each_refill_reads_it() {
    on_both("plans", |limiter, clock, backend| async move {
        let continuous = limiter.with_policy(&Policy::token_bucket(10, "10/1m").unwrap());
        let interval_plan = limiter.with_policy(&interval(10, "10/1m"));
        continuous.check("k", 10).await.unwrap();
        clock.advance(secs(30));
        // Owed as of the take; no minute has ended since: nothing yet.
        let switched = interval_plan.check("k", 1).await.unwrap();
        assert_eq!((switched.allowed, switched.retry_after), (false, Some(secs(30))), "{backend}");
        clock.advance(secs(30));
        let refilled = interval_plan.check("k", 10).await.unwrap();
        assert!(refilled.allowed, "{backend}");
        clock.advance(secs(15));
        // Back to continuous: the debt counted at the last take pays off from then.
        let back = continuous.check("k", 1).await.unwrap();
        assert_eq!((back.allowed, back.remaining), (true, 1), "{backend}: 2.5 tokens back after 15 s, one taken");
        // A bigger plan by interval: the debt is kept whole.
        let bigger = limiter.with_policy(&interval(30, "10/1m"));
        let more = bigger.check("k", 21).await.unwrap();
        assert_eq!((more.allowed, more.remaining), (true, 0), "{backend}");
        vec![switched, refilled, back, more]
    })
    .await;
}

#[tokio::test]
async fn a_late_refund_across_a_switch_of_refill_gives_back_nothing_the_interval_paid() {
    on_both("switch", |limiter, clock, backend| async move {
        // One reduced rate, refilled two ways: a token per 10 ms, or ten at each 100 ms end.
        let continuous = limiter.with_policy(&Policy::token_bucket(10, "100/1s").unwrap());
        let by_interval = limiter.with_policy(&interval(10, "10/100ms"));
        let us = |n| Duration::from_micros(n);
        clock.advance(Duration::from_millis(100) - us(1));
        let taken = continuous.check("k", 5).await.unwrap();
        clock.advance(us(2));
        // The period that just ended paid its ten: the bucket is full again.
        let refilled = by_interval.check("k", 10).await.unwrap();
        assert!(refilled.allowed, "{backend}");
        clock.advance(us(1));
        // Those five were paid back by the refill: nothing is left to give.
        let refunded = continuous.refund("k", 5, &taken).await.unwrap();
        assert_eq!(refunded.remaining, 0, "{backend}: {refunded:?}");
        clock.advance(us(1));
        let next = by_interval.check("k", 4).await.unwrap();
        assert!(!next.allowed, "{backend}: ten a period, and the period has had its ten");
        vec![taken, refilled, refunded, next]
    })
    .await;
}

#[test]
fn the_interval_spelling_is_one_in_code_and_text() {
    let policy = interval(10, "10/1m");
    assert_eq!(policy.to_string(), "token_bucket capacity 10 rate 10/1m refill interval");
    assert_eq!(policy.refill(), Some(redlimit::Refill::Interval));
    assert_ne!(policy, Policy::token_bucket(10, "10/1m").unwrap(), "another rule");
}
