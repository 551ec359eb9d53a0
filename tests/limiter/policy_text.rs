//! A policy round-trips through its text: what `Display` writes, `FromStr`
//! reads back as the same policy (dry run included), every algorithm's
//! shorter forms read too, any text at all is an answer (never a panic),
//! and a policies file takes the same line for a policy.
//!
//! `cargo test --test limiter policy_text::`

use proptest::prelude::*;
use redlimit::policies::PolicySet;
use redlimit::{AlgorithmKind, Policy};

/// Every algorithm: its text as printed, the policy built in code, and the
/// other forms that read as the same policy.
fn every_form() -> Vec<(&'static str, Policy, Vec<&'static str>)> {
    vec![
        (
            "fixed_window 10/1s,100/1m",
            Policy::fixed_window("10/1s,100/1m").unwrap(),
            vec!["fixed_window strategies 10/1s,100/1m", "fixed_window 10/1s, 100/1m", " fixed_window\t10/1s ,100/1m "],
        ),
        (
            "sliding_window 10/1s precision 100ms",
            Policy::sliding_window("10/1s", "100ms").unwrap(),
            vec!["sliding_window 10/1s", "sliding_window precision 100ms strategies 10/1s"],
        ),
        (
            "sliding_log 10/1s,100/1m",
            Policy::sliding_log("10/1s,100/1m").unwrap(),
            vec!["sliding_log strategies 10/1s,100/1m"],
        ),
        (
            "token_bucket capacity 40 rate 1/1m",
            Policy::token_bucket(40, "1/1m").unwrap(),
            vec![
                "token_bucket rate 1/1m capacity 40",
                "token_bucket capacity 40 rate 1/60s",
                "token_bucket capacity 40 rate 1/1m refill continuous",
            ],
        ),
        (
            "token_bucket capacity 10 rate 10/1m refill interval",
            Policy::token_bucket_interval(10, "10/1m").unwrap(),
            vec![
                "token_bucket refill interval capacity 10 rate 10/1m",
                "token_bucket rate 10/60s refill interval capacity 10",
            ],
        ),
        (
            "leaky_bucket capacity 2 rate 1/2s",
            Policy::leaky_bucket(2, "1/2s").unwrap(),
            vec!["leaky_bucket rate 1/2s capacity 2"],
        ),
        (
            "gcra 10/1s burst 9",
            Policy::gcra("10/1s", 9).unwrap(),
            vec!["gcra 10/1s", "gcra rate 10/1s burst 9", "gcra burst 9 rate 10/1s"],
        ),
        (
            "concurrency limit 4 lease 30s",
            Policy::concurrency(4, "30s").unwrap(),
            vec!["concurrency limit 4", "concurrency lease 30s limit 4"],
        ),
    ]
}

#[test]
fn every_algorithms_every_form_reads_back_as_the_same_policy() {
    let forms = every_form();
    for kind in AlgorithmKind::ALL {
        assert!(forms.iter().any(|(_, policy, _)| policy.algorithm() == kind), "{kind} has its forms");
    }
    for (text, policy, others) in forms {
        assert_eq!(policy.to_string(), text);
        let read: Policy = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((&read, read.is_dry_run()), (&policy, false), "{text}");
        for other in others {
            let read: Policy = other.parse().unwrap_or_else(|e| panic!("{other}: {e}"));
            assert_eq!(read, policy, "{other}");
            assert_eq!(read.to_string(), text, "{other} prints as the one text");
        }
        let trial = policy.clone().with_dry_run(true);
        assert_eq!(trial.to_string(), format!("{text} dry_run"));
        let read: Policy = trial.to_string().parse().unwrap();
        assert_eq!((&read, read.is_dry_run()), (&policy, true), "{trial}");
    }
}

#[test]
fn a_wrong_text_says_what_is_wrong_and_how_to_write_it() {
    for (text, says) in [
        (
            "token_bucket 40 per 1/1m",
            "invalid rate limit policy: `token_bucket 40 per 1/1m`: unexpected `40`: `token_bucket` takes `capacity`, \
             `rate`, `refill`, each followed by its value, and `dry_run` last; write it like `token_bucket capacity 10 rate 1/1s`",
        ),
        (
            "fixed_window 0/1s",
            "invalid rate limit policy: `fixed_window 0/1s`: `strategies`: `0/1s`: a limit of 0 would deny every call; use at least 1",
        ),
        ("token_bucket capacity 40", "invalid rate limit policy: `token_bucket capacity 40`: `token_bucket` needs `rate`: add e.g. `rate = \"1/1s\"`"),
        ("", "invalid rate limit policy: ``: an empty policy"),
        ("window 10/1s", "invalid rate limit policy: `window 10/1s`: unknown algorithm `window`: expected one of `fixed_window`"),
        ("concurrency limit 2 lease 50ms", "a lease of 50ms is too short to be renewed"),
        ("token_bucket capacity 10 rate 10/1m refill weekly", "`refill`: unknown refill `weekly`: expected one of `continuous`, `interval`"),
        ("leaky_bucket capacity 10 rate 10/1m refill interval", "unexpected `refill`: `leaky_bucket` takes `capacity`, `rate`"),
        ("gcra 1/1s burst -1", "`burst` takes a whole number, like `burst 10`, not `-1`"),
        ("gcra 1/1s\nburst 1 \u{1b}", "unexpected `\\u{1b}`"),
    ] {
        let error = text.parse::<Policy>().unwrap_err().to_string();
        assert!(error.contains(says), "{text:?}:\n{error}\nshould say\n{says}");
    }
}

#[test]
fn a_policies_file_takes_a_policys_text() {
    let set = PolicySet::parse(
        "policies.toml",
        "[policies]\nsearch = \"sliding_log 10/1s,100/1m\"\ntrial = \"gcra 5/1s dry_run\"\n\n[policies.upload]\nalgo = \"token_bucket\"\ncapacity = 20\nrate = \"1/3s\"\n",
    )
    .unwrap();
    assert_eq!(set.get("search").unwrap(), &Policy::sliding_log("10/1s,100/1m").unwrap());
    assert_eq!(set.get("search").unwrap().name(), Some("search"));
    assert!(set.get("trial").unwrap().is_dry_run());
    assert_eq!(set.get("upload").unwrap().to_string(), "token_bucket capacity 20 rate 1/3s");

    let error =
        PolicySet::parse("policies.toml", "[policies]\nok = \"gcra 1/1s\"\nwrong = \"token_bucket 40 per 1/1m\"\n")
            .unwrap_err()
            .to_string();
    assert!(
        error.starts_with("policies.toml:3: policy \"wrong\": \"token_bucket 40 per 1/1m\": unexpected `40`"),
        "{error}"
    );
}

/// A valid policy of any algorithm, with any dry run.
fn policy() -> impl Strategy<Value = Policy> {
    let window = prop::sample::select(vec!["1ms", "250ms", "1s", "10s", "1m", "90m", "1h", "1d"]);
    let strategies = prop::collection::vec((1u64..5_000, window.clone()), 1..4)
        .prop_map(|s| s.iter().map(|(limit, w)| format!("{limit}/{w}")).collect::<Vec<_>>().join(","));
    let rate = (1u64..1_000, window).prop_map(|(count, period)| format!("{count}/{period}"));
    let policy = prop_oneof![
        strategies.clone().prop_map(|s| Policy::fixed_window(&s)),
        strategies.clone().prop_map(|s| Policy::sliding_window(&s, "1ms")),
        strategies.prop_map(|s| Policy::sliding_log(&s)),
        (1u64..10_000, rate.clone()).prop_map(|(c, r)| Policy::token_bucket(c, &r)),
        (1u64..10_000, rate.clone()).prop_map(|(c, r)| Policy::leaky_bucket(c, &r)),
        (rate, 0u64..1_000).prop_map(|(r, b)| Policy::gcra(&r, b)),
        (1u64..1_000, prop::sample::select(vec!["100ms", "1s", "30s", "1h"]))
            .prop_map(|(l, lease)| Policy::concurrency(l, lease)),
    ];
    (policy, any::<bool>())
        .prop_filter_map("the rules accept it", |(policy, dry_run)| policy.ok().map(|p| p.with_dry_run(dry_run)))
}

proptest! {
    #[test]
    fn any_policy_round_trips_through_its_text(policy in policy()) {
        let text = policy.to_string();
        let read: Policy = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&read, &policy);
        prop_assert_eq!(read.is_dry_run(), policy.is_dry_run());
        prop_assert_eq!(read.to_string(), text);
    }

    #[test]
    fn any_text_reads_or_says_why_never_panics(text in "[a-z_ 0-9/,.\\-]{0,40}|\\PC{0,40}") {
        if let Err(error) = text.parse::<Policy>() {
            prop_assert!(error.to_string().starts_with("invalid rate limit policy: `"), "{}", error);
        }
    }
}
