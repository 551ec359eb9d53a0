//! The grammar under arbitrary input: never a panic, and every accepted
//! policy within the bounds that keep Redis arithmetic exact.

use proptest::prelude::*;
use redlimit_grammar::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,40}") {
        let _ = parse_strategies(&text);
        let _ = parse_rate(&text);
        let _ = parse_duration(&text);
    }

    #[test]
    fn grammar_shaped_text_never_panics(text in "[0-9]{0,25}/[0-9]{0,25}(us|ms|s|m|h|d|x)?(,[0-9]{0,3}/[0-9]{0,3}s)?") {
        if let Ok(strategies) = parse_strategies(&text) {
            for s in strategies {
                prop_assert!(s.limit >= 1 && s.limit <= MAX_LIMIT);
                prop_assert!(s.window_us >= 1 && s.window_us <= MAX_DURATION_US);
            }
        }
    }

    #[test]
    fn written_strategies_parse_back(limit in 1..=MAX_LIMIT, count in 1u64..100_000, unit in prop::sample::select(vec!["us", "ms", "s", "m", "h", "d"])) {
        let text = format!("{limit}/{count}{unit}");
        match parse_strategy(&text) {
            Ok(s) => prop_assert_eq!(parse_strategy(&s.to_string()).unwrap(), s),
            Err(e) => prop_assert!(e.message().contains("too long"), "{}: {}", text, e),
        }
    }

    #[test]
    fn every_valid_bucket_stays_exact(capacity in any::<u64>(), count in any::<u64>(), period in any::<u64>(), burst in proptest::option::of(any::<u64>())) {
        for kind in [AlgorithmKind::TokenBucket, AlgorithmKind::LeakyBucket, AlgorithmKind::Gcra] {
            let mut spec = PolicySpec::new(kind);
            let rate = Rate { count: count % (MAX_LIMIT + 1), period_us: period % (MAX_DURATION_US + 1) };
            if rate.count == 0 || rate.period_us == 0 { continue; }
            spec.rate = Some(rate);
            if kind == AlgorithmKind::Gcra { spec.burst = burst; } else { spec.capacity = Some(capacity); }
            if spec.validate().is_ok() {
                let size = if kind == AlgorithmKind::Gcra { burst.unwrap_or(rate.count - 1) + 1 } else { capacity };
                let (_, p) = rate.reduced();
                prop_assert!((size as u128) * (p as u128) <= MAX_EXACT as u128);
            }
        }
    }

    /// Any numbers at all, in any parameter of any algorithm: `validate`
    /// never panics, and what it accepts is within the grammar's bounds.
    #[test]
    fn arbitrary_numbers_never_panic(
        kind in prop::sample::select(AlgorithmKind::ALL.to_vec()),
        strategies in proptest::option::of(proptest::collection::vec((any::<u64>(), any::<u64>()), 0..20)),
        precision in proptest::option::of(any::<u64>()),
        capacity in proptest::option::of(any::<u64>()),
        rate in proptest::option::of((any::<u64>(), any::<u64>())),
        burst in proptest::option::of(any::<u64>()),
        small in any::<bool>(),
    ) {
        // Half the cases small numbers, where zeros and valid policies are frequent.
        let shrink = |n: u64| if small { n % 4 } else { n };
        let mut spec = PolicySpec::new(kind);
        spec.strategies = strategies.map(|v| v.into_iter().map(|(l, w)| redlimit_grammar::Strategy::new(shrink(l), shrink(w))).collect());
        spec.precision = precision.map(shrink);
        spec.capacity = capacity.map(shrink);
        spec.rate = rate.map(|(c, p)| Rate { count: shrink(c), period_us: shrink(p) });
        spec.burst = burst.map(shrink);
        if spec.validate().is_ok() {
            for s in spec.strategies.iter().flatten() {
                prop_assert!(check_strategy(*s).is_ok());
            }
            if let Some(rate) = spec.rate {
                prop_assert!(check_rate(rate).is_ok());
            }
        }
    }
}
