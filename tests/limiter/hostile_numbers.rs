//! Hostile numbers: huge costs, out-of-range strategies and policies built at
//! run time from bad values give clear errors or clean denials, never a
//! panic or a silently wrong limit.

use proptest::prelude::*;
use redlimit::{AlgorithmKind, Error, Limiter, ManualClock, Policy, Rate, Store, Strategy};
use redlimit_grammar::PolicySpec;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

#[test]
fn bad_policies_are_clear_errors() {
    let cases: Vec<(Result<Policy, Error>, &str)> = vec![
        (Policy::fixed_window("18446744073709551615/1s"), "too large"),
        (Policy::sliding_log("1/100000d"), "too long"),
        (Policy::fixed_window("0/1s"), "limit of 0"),
        (Policy::fixed_window("10/0s"), "zero"),
        (Policy::token_bucket(0, "1/1s"), "capacity of 0"),
        (Policy::token_bucket(u64::MAX, "1/1s"), "too large"),
        (Policy::token_bucket(1 << 30, "1/1d"), "exactly"),
        (Policy::leaky_bucket(10, "0/1s"), "count of 0"),
        (Policy::gcra("1/1s", u64::MAX), "too large"),
        (Policy::sliding_window("10/1s", "3s"), "does not divide"),
        (Policy::sliding_window("10/1d", "1ms"), "at most 10000"),
        (Policy::fixed_window(&vec!["1/1s"; 17].join(",")), "at most 16"),
    ];
    for (result, needle) in cases {
        let err = result.expect_err(needle).to_string();
        assert!(err.starts_with("invalid rate limit policy: "), "{err}");
        assert!(err.contains(needle), "{err} should mention {needle}");
    }
}

fn spec(kind: AlgorithmKind, edit: impl FnOnce(&mut PolicySpec)) -> Result<Policy, Error> {
    let mut spec = PolicySpec::new(kind);
    edit(&mut spec);
    Policy::from_spec(spec)
}

/// `from_spec` trusted numbers to be what the parser makes: a zero window or
/// precision panicked (a remainder by zero), a gcra rate of count 0 panicked
/// or reported a burst of 2^64 - 1, a zero window or period passed and then
/// allowed everything or divided by zero, a limit of u64::MAX passed and
/// failed on Redis. Each is now the parser's own error.
#[test]
fn policies_built_from_numbers_meet_the_grammar() {
    let strategies = |limit, window_us| Some(vec![Strategy::new(limit, window_us)]);
    let rate = |count, period_us| Some(Rate { count, period_us });
    use AlgorithmKind::*;
    let cases: Vec<(Result<Policy, Error>, &str)> = vec![
        (spec(FixedWindow, |s| s.strategies = strategies(10, 0)), "`10/0s`: duration `0s` is zero"),
        (spec(SlidingWindow, |s| s.strategies = strategies(10, 0)), "`10/0s`: duration `0s` is zero"),
        (spec(SlidingLog, |s| s.strategies = strategies(0, 1_000_000)), "`0/1s`: a limit of 0 would deny every call"),
        (
            spec(SlidingWindow, |s| {
                s.strategies = strategies(10, 1_000_000);
                s.precision = Some(0);
            }),
            "duration `0s` is zero",
        ),
        (
            spec(FixedWindow, |s| s.strategies = strategies(u64::MAX, 1_000_000)),
            "`18446744073709551615/1s`: the limit is too large; the largest allowed is 1099511627776",
        ),
        (spec(Gcra, |s| s.rate = rate(0, 1_000_000)), "`0/1s`: a count of 0 would deny every call"),
        (spec(Gcra, |s| s.rate = rate(1, 0)), "`1/0s`: duration `0s` is zero"),
        (
            spec(TokenBucket, |s| {
                s.capacity = Some(5);
                s.rate = rate(0, 1_000_000);
            }),
            "a count of 0",
        ),
        (
            spec(LeakyBucket, |s| {
                s.capacity = Some(5);
                s.rate = rate(1, 0);
            }),
            "duration `0s` is zero",
        ),
    ];
    for (result, needle) in cases {
        let err = result.expect_err(needle).to_string();
        assert!(err.starts_with("invalid rate limit policy: "), "{err}");
        assert!(err.contains(needle), "{err} should say {needle}");
        assert!(!err.contains("18446744073709551615 is too large"), "{err}");
    }
}

/// An error quotes a bounded, escaped prefix of what it was given, however
/// long: a 500 KB policy string used to give a 1 MB error.
#[test]
fn errors_quote_a_bounded_escaped_prefix_of_their_input() {
    let long = format!("10/1s,{}\u{1b}[2J", "9".repeat(500_000));
    for err in [
        Policy::fixed_window(&long).unwrap_err(),
        Policy::sliding_window("10/1s", &long).unwrap_err(),
        Policy::gcra(&long, 1).unwrap_err(),
    ] {
        let text = err.to_string();
        assert!(text.len() < 1_000, "{} bytes: {}", text.len(), &text[..200]);
        assert!(text.contains("…(500010 bytes)") || text.contains("…(500004 bytes)"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }
    let err = Policy::sliding_log("1/1s\n\u{7}\u{202e}x").unwrap_err().to_string();
    assert!(err.contains(r"1s\n\u{7}\u{202e}x"), "{err}");
    // TOML strings hold no raw control characters: the document's is plain.
    let doc = format!("[policies.a]\nalgo = \"fixed_window\"\nstrategies = \"10/1s,{}\"\n", "9".repeat(500_000));
    let problems = redlimit::policies::PolicySet::parse("p.toml", &doc).unwrap_err().to_string();
    assert!(problems.len() < 1_000 && problems.contains("…(500006 bytes)"), "{problems}");
}

#[tokio::test]
async fn the_largest_policies_and_costs_decide_exactly_on_both_backends() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for policy in [
            Policy::fixed_window("1099511627776/366d").unwrap(),
            Policy::sliding_window("1099511627776/366d", "1d").unwrap(),
            Policy::sliding_log("1099511627776/366d").unwrap(),
            Policy::token_bucket(1 << 40, "1/1us").unwrap(),
            Policy::leaky_bucket(52_000, "1/1d").unwrap(),
            Policy::gcra("1/1d", 51_999).unwrap(),
        ] {
            let limiter = Limiter::new("largest", policy.clone(), store);
            let max = policy.max_cost();
            for cost in [u64::MAX, max + 1] {
                let d = limiter.check("k", cost).await.unwrap();
                assert!(d.can_never_pass(), "{backend} {policy} cost {cost}: {d:?}");
            }
            let all = limiter.check("k", max).await.unwrap();
            assert!(all.allowed && all.remaining == 0, "{backend} {policy}: {all:?}");
            let one_more = limiter.check("k", 1).await.unwrap();
            assert!(!one_more.allowed && one_more.retry_after.is_some(), "{backend} {policy}: {one_more:?}");
            both.clock.advance(Duration::from_secs(400 * 86_400));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any policy the builder accepts decides any cost at any time step
    /// without panicking, and never admits more than its limit at one instant.
    #[test]
    fn random_policies_and_costs_never_panic(limit in 1u64..2_000, window_ms in 1u64..10_000_000, costs in proptest::collection::vec(any::<u64>(), 1..20), step_us in any::<u32>()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let clock = ManualClock::new();
            let store = Store::memory().with_clock(clock.clone());
            let strategy = format!("{limit}/{window_ms}ms");
            let policies = [
                Policy::fixed_window(&strategy),
                Policy::sliding_log(&strategy),
                Policy::token_bucket(limit, &strategy),
                Policy::leaky_bucket(limit, &strategy),
                Policy::gcra(&strategy, limit - 1),
            ];
            for policy in policies.into_iter().flatten() {
                let limiter = Limiter::new("prop", policy, &store);
                let mut taken = 0u64;
                for &cost in &costs {
                    let d = limiter.check("k", cost % (limit * 2 + 2)).await.unwrap();
                    if d.allowed { taken += cost % (limit * 2 + 2); }
                }
                prop_assert!(taken <= limit);
                clock.advance(Duration::from_micros(u64::from(step_us)));
                let _ = limiter.check("k", u64::MAX).await.unwrap();
            }
            Ok(())
        })?;
    }
}

/// A clock far in the future (a broken `Clock`, a manual clock set or
/// advanced without care) is taken as the latest time decisions know: every
/// algorithm decides on both stores, and a manual clock stops rather than wrap.
#[tokio::test]
async fn a_clock_at_the_end_of_time_decides_without_panic_and_never_wraps() {
    let both = BothStores::start().await;
    both.clock.set_us(u64::MAX - 10);
    both.clock.advance(Duration::MAX);
    assert_eq!(redlimit::Clock::now_us(&both.clock), Some(u64::MAX));
    for spec in ["fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"] {
        let policy = match spec {
            "fixed_window" => Policy::fixed_window("2/1s,5/1d"),
            "sliding_window" => Policy::sliding_window("2/1s", "100ms"),
            "sliding_log" => Policy::sliding_log("2/1s"),
            "token_bucket" => Policy::token_bucket(2, "1/1s"),
            "leaky_bucket" => Policy::leaky_bucket(2, "1/1s"),
            _ => Policy::gcra("1/1s", 1),
        }
        .unwrap();
        for (backend, store) in both.each() {
            let limiter = Limiter::new("end-of-time", policy.clone(), store);
            let allowed: Vec<bool> = [
                limiter.check("k", 1).await.unwrap().allowed,
                limiter.check("k", 1).await.unwrap().allowed,
                limiter.check("k", 1).await.unwrap().allowed,
            ]
            .into();
            assert_eq!(allowed, [true, true, false], "{backend} {policy}");
        }
    }
}
