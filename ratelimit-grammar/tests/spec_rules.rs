//! The rules a whole policy obeys, and that a policy built from numbers
//! rather than text meets the same rules with the same messages.

use redlimit_grammar::*;

fn spec(kind: AlgorithmKind) -> PolicySpec {
    PolicySpec::new(kind)
}

#[test]
fn reports_every_problem_with_its_parameter() {
    let mut s = spec(AlgorithmKind::TokenBucket);
    s.strategies = Some(parse_strategies("10/1s").unwrap());
    s.burst = Some(3);
    let errors = s.validate().unwrap_err();
    let params: Vec<_> = errors.iter().map(|(p, _)| *p).collect();
    assert_eq!(params, vec![Some(Param::Strategies), Some(Param::Burst), None, None]);
    assert!(errors[2].1.message().contains("needs `capacity`"));
}

#[test]
fn precision_must_divide_every_window() {
    let mut s = spec(AlgorithmKind::SlidingWindow);
    s.strategies = Some(parse_strategies("10/1s,100/1m").unwrap());
    s.precision = Some(700_000);
    let errors = s.validate().unwrap_err();
    assert_eq!(errors.len(), 2);
    assert!(errors[0].1.message().contains("does not divide the window of `10/1s`"));
    s.precision = None;
    assert!(s.validate().is_ok());
    assert_eq!(PolicySpec::default_precision(s.strategies.as_ref().unwrap()), 100_000);
}

#[test]
fn bucket_products_must_stay_exact() {
    let mut s = spec(AlgorithmKind::TokenBucket);
    s.capacity = Some(1 << 30);
    s.rate = Some(parse_rate("1/1d").unwrap());
    assert!(s.validate().unwrap_err()[0].1.message().contains("exactly"));
    s.rate = Some(parse_rate("1000000/1d").unwrap());
    s.capacity = Some(1_000_000);
    assert!(s.validate().is_ok(), "reduced to 1/86400us, exact");
}

#[test]
fn sliding_log_limits_are_those_of_every_window() {
    // The log keeps one entry per admitted call, bounded per key, so its
    // limits are not capped below the others'.
    let mut s = spec(AlgorithmKind::SlidingLog);
    s.strategies = Some(parse_strategies("2000000/1h").unwrap());
    assert!(s.validate().is_ok());
    s.strategies = Some(vec![Strategy::new(MAX_LIMIT + 1, 1_000_000)]);
    assert!(s.validate().is_err());
}

fn spec_with(kind: AlgorithmKind, edit: impl FnOnce(&mut PolicySpec)) -> PolicySpec {
    let mut s = spec(kind);
    edit(&mut s);
    s
}

fn messages(s: &PolicySpec) -> Vec<String> {
    s.validate().unwrap_err().into_iter().map(|(_, e)| e.to_string()).collect()
}

/// A spec built from numbers used to reach a remainder by zero (a zero
/// window or precision), an underflow (a gcra rate of count 0) or to pass
/// (a zero window, a limit of u64::MAX): each is now the grammar's error.
#[test]
fn numbers_the_grammar_rejects_are_rejected_with_its_messages() {
    let strategy = |limit, window_us| Strategy::new(limit, window_us);
    for kind in [AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindow, AlgorithmKind::SlidingLog] {
        for (bad, text) in [
            (strategy(10, 0), "10/0s"),
            (strategy(0, 1_000_000), "0/1s"),
            (strategy(u64::MAX, 1_000_000), "18446744073709551615/1s"),
            (strategy(1, u64::MAX), "1/18446744073709551615us"),
        ] {
            let s = spec_with(kind, |s| s.strategies = Some(vec![strategy(1, 1_000_000), bad]));
            assert_eq!(messages(&s), vec![parse_strategy(text).unwrap_err().to_string()], "{kind} {text}");
        }
    }
    let zero_precision = spec_with(AlgorithmKind::SlidingWindow, |s| {
        s.strategies = Some(parse_strategies("10/1s").unwrap());
        s.precision = Some(0);
    });
    assert_eq!(messages(&zero_precision), vec![parse_duration("0s").unwrap_err().to_string()]);
    for kind in [AlgorithmKind::TokenBucket, AlgorithmKind::LeakyBucket, AlgorithmKind::Gcra] {
        for (bad, text) in [
            (Rate { count: 0, period_us: 1_000_000 }, "0/1s"),
            (Rate { count: 1, period_us: 0 }, "1/0s"),
            (Rate { count: u64::MAX, period_us: 1 }, "18446744073709551615/1us"),
        ] {
            let s = spec_with(kind, |s| {
                s.rate = Some(bad);
                if kind != AlgorithmKind::Gcra {
                    s.capacity = Some(10);
                }
            });
            assert_eq!(messages(&s), vec![parse_rate(text).unwrap_err().to_string()], "{kind} {text}");
        }
    }
}

#[test]
fn too_many_strategies_is_one_error_however_many() {
    let s = spec_with(AlgorithmKind::SlidingWindow, |s| {
        s.strategies = Some(vec![Strategy::new(1, 0); 100_000]);
        s.precision = Some(0);
    });
    assert_eq!(messages(&s), vec!["100000 strategies given; at most 16 are allowed".to_string()]);
}

#[test]
fn errors_quote_a_bounded_escaped_prefix_of_the_input() {
    let huge = format!("\x1b1/{}s", "1".repeat(500_000));
    for err in
        [parse_strategies(&huge).unwrap_err(), parse_duration(&huge).unwrap_err(), parse_rate(&huge).unwrap_err()]
    {
        assert!(err.message().len() < 600, "{} bytes", err.message().len());
        assert!(err.message().contains("…(500004 bytes)"), "{err}");
        assert!(err.message().contains("`\\u{1b}1/111"), "{err}");
        assert!(!err.message().contains('\x1b'), "{err}");
    }
    let err = parse_strategy("10/1\u{1b}[2J\nx").unwrap_err();
    assert_eq!(
        err.message(),
        r"`10/1\u{1b}[2J\nx`: unknown duration unit in `1\u{1b}[2J\nx`: use one of `us`, `ms`, `s`, `m`, `h`, `d` (e.g. `500ms`, `1s`)"
    );
    assert!(!AlgorithmKind::from_name("\r").unwrap_err().message().contains('\r'));
}
