//! `Decision::quotas`: every strategy's own state after a multi-strategy
//! window decision (for IETF `RateLimit` headers), the same on both backends.

use redlimit::{Decision, Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

const S: u64 = 1_000_000;
const MS: u64 = 1_000;

/// `(remaining, reset_after µs)` per strategy, and the strategies as named.
fn quotas(d: &Decision) -> Vec<(u64, u64)> {
    d.quotas.iter().map(|q| (q.remaining, q.reset_after.as_micros() as u64)).collect()
}

async fn check(store: &Store, policy: &Policy, cost: u64) -> Decision {
    Limiter::new("quotas", policy.clone(), store).with_deny_cache(false).check("alice", cost).await.unwrap()
}

/// Calls at 0, 0, 300 ms (denied) and 1 s on a `2/1s,3/1m` policy; the last
/// expected row differs by algorithm (a fixed minute window started at 0).
async fn pins(policy: Policy, after_one_second: [(u64, u64); 2]) {
    let both = BothStores::start().await;
    for (name, store) in both.each() {
        let start = redlimit::Clock::now_us(&both.clock).unwrap();
        let first = check(store, &policy, 1).await;
        let names: Vec<String> = first.quotas.iter().map(|q| q.strategy.to_string()).collect();
        assert_eq!(names, ["2/1s", "3/1m"], "{name} {policy}");
        assert_eq!(quotas(&first), [(1, S), (2, 60 * S)], "{name} {policy}");

        let second = check(store, &policy, 1).await;
        assert_eq!(quotas(&second), [(0, S), (1, 60 * S)], "{name} {policy}");

        // A denial takes nothing: what is left now, counted down.
        both.clock.advance(Duration::from_millis(300));
        let denied = check(store, &policy, 1).await;
        assert!(!denied.allowed, "{name} {policy}");
        assert_eq!(quotas(&denied), [(0, 700 * MS), (1, 59_700 * MS)], "{name} {policy}");

        both.clock.set_us(start + S);
        let later = check(store, &policy, 1).await;
        assert!(later.allowed, "{name} {policy}");
        assert_eq!(quotas(&later), after_one_second, "{name} {policy}");
        // The summary fields still describe the strategy with the least room.
        assert_eq!((later.limit, later.remaining), (3, 0), "{name} {policy}");
        both.clock.set_us(start);
    }
}

#[tokio::test]
async fn fixed_window_reports_every_strategy() {
    pins(Policy::fixed_window("2/1s,3/1m").unwrap(), [(1, S), (0, 59 * S)]).await;
}

#[tokio::test]
async fn sliding_window_reports_every_strategy() {
    pins(Policy::sliding_window("2/1s,3/1m", "1s").unwrap(), [(1, S), (0, 60 * S)]).await;
}

#[tokio::test]
async fn sliding_log_reports_every_strategy() {
    pins(Policy::sliding_log("2/1s,3/1m").unwrap(), [(1, S), (0, 60 * S)]).await;
}

#[tokio::test]
async fn a_cost_zero_call_reports_quotas_without_taking() {
    let both = BothStores::start().await;
    let policy = Policy::fixed_window("2/1s,3/1m").unwrap();
    for (name, store) in both.each() {
        check(store, &policy, 1).await;
        let d = check(store, &policy, 0).await;
        assert_eq!(quotas(&d), [(1, S), (2, 60 * S)], "{name}");
    }
}

#[tokio::test]
async fn single_rule_policies_have_no_quotas() {
    let both = BothStores::start().await;
    let policies = [
        Policy::fixed_window("2/1s").unwrap(),
        Policy::sliding_window("2/1s", "100ms").unwrap(),
        Policy::sliding_log("2/1s").unwrap(),
        Policy::token_bucket(2, "1/1s").unwrap(),
        Policy::leaky_bucket(2, "1/1s").unwrap(),
        Policy::gcra("1/1s", 1).unwrap(),
    ];
    for (name, store) in both.each() {
        for policy in &policies {
            let d = check(store, policy, 1).await;
            assert!(d.allowed && d.quotas.is_empty(), "{name} {policy}: {d:?}");
        }
    }
}
