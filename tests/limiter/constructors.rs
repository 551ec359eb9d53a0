//! Every public constructor under arbitrary input: no panic, a clear error
//! for what the grammar rejects, and every policy accepted decides without
//! an error on both stores (memory, and Redis on its own clock and on a
//! client clock) at costs 0, 1, the largest admissible and `u64::MAX`.

use proptest::prelude::*;
use redlimit::http::{KeyBy, TrustedProxies};
use redlimit::policies::PolicySet;
use redlimit::{AlgorithmKind, Limiter, ManualClock, Policy, Store};
use redlimit_grammar::{Param, PolicySpec, MAX_DURATION_US, MAX_EXACT, MAX_LIMIT};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::runtime::block_on;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// One Redis for the binary: a server per case would make the run slow.
struct Stores {
    _server: RedisServer,
    memory: Store,
    redis_server_clock: Store,
    redis_client_clock: Store,
}

fn stores() -> &'static Stores {
    static STORES: OnceLock<Stores> = OnceLock::new();
    STORES.get_or_init(|| {
        let server = RedisServer::start();
        let redis = block_on(Store::redis(&server.url())).expect("connect to the private redis-server");
        Stores {
            memory: Store::memory().with_clock(ManualClock::new()),
            redis_client_clock: redis.clone().with_clock(ManualClock::new()),
            redis_server_clock: redis,
            _server: server,
        }
    })
}

/// A count (a limit, capacity, burst or rate count): where the rules
/// change, small ones, any valid one, any number at all.
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => prop::sample::select(vec![
            0,
            1,
            MAX_LIMIT - 1,
            MAX_LIMIT,
            MAX_LIMIT + 1,
            MAX_EXACT,
            1 << 53,
            u64::MAX,
        ]),
        6 => 1u64..1_000,
        2 => 1u64..=MAX_LIMIT,
        1 => any::<u64>(),
    ]
}

/// A window, precision or period in µs, in the same four kinds.
fn duration() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => prop::sample::select(vec![0, 1, MAX_DURATION_US, MAX_DURATION_US + 1, 1 << 53, u64::MAX]),
        4 => prop::sample::select(vec![1_000, 100_000, 1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000]),
        3 => 1u64..10_000_000,
        2 => 1u64..=MAX_DURATION_US,
        1 => any::<u64>(),
    ]
}

fn kind() -> impl Strategy<Value = AlgorithmKind> {
    prop::sample::select(AlgorithmKind::ALL.to_vec())
}

/// A spec of numbers: mostly the parameters the algorithm takes, now and
/// then others; a precision absent, any, or one that divides the windows.
fn spec() -> impl Strategy<Value = PolicySpec> {
    let strategies = prop_oneof![
        1 => Just(Vec::new()),
        6 => proptest::collection::vec((count(), duration()), 1..4),
    ];
    let precision = (0..4u8, duration(), 1u64..12);
    (kind(), strategies, precision, count(), (count(), duration()), proptest::option::of(count()), 0..8u8).prop_map(
        |(kind, strategies, (how, any_precision, divisor), capacity, (n, period_us), burst, stray)| {
            let takes = kind.params();
            let given = |p| takes.contains(&p) || stray == 0;
            let mut spec = PolicySpec::new(kind);
            let windows = strategies.iter().fold(0, |g, &(_, w)| gcd(g, w));
            spec.precision = match how {
                0 => None,
                1 => Some(any_precision),
                _ => Some((windows / divisor).max(1)),
            }
            .filter(|_| given(Param::Precision));
            if given(Param::Strategies) {
                spec.strategies = Some(
                    strategies
                        .into_iter()
                        .map(|(limit, window_us)| redlimit::Strategy::new(limit, window_us))
                        .collect(),
                );
            }
            spec.capacity = Some(capacity).filter(|_| given(Param::Capacity));
            spec.rate = Some(redlimit::Rate { count: n, period_us }).filter(|_| given(Param::Rate));
            spec.burst = burst.filter(|_| given(Param::Burst));
            spec.limit = Some(capacity).filter(|_| given(Param::Limit));
            spec.lease = Some(period_us).filter(|_| given(Param::Lease) && n % 2 == 0);
            spec
        },
    )
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The same policy through the typed constructor, its numbers written as text.
fn typed(spec: &PolicySpec) -> Option<Result<Policy, redlimit::Error>> {
    let strategies = || {
        let list = spec.strategies.as_ref()?;
        Some(list.iter().map(|s| format!("{}/{}us", s.limit, s.window_us)).collect::<Vec<_>>().join(","))
    };
    let rate = || spec.rate.map(|r| format!("{}/{}us", r.count, r.period_us));
    Some(match spec.kind {
        AlgorithmKind::FixedWindow => Policy::fixed_window(&strategies()?),
        AlgorithmKind::SlidingLog => Policy::sliding_log(&strategies()?),
        AlgorithmKind::SlidingWindow => Policy::sliding_window(&strategies()?, &format!("{}us", spec.precision?)),
        AlgorithmKind::TokenBucket => Policy::token_bucket(spec.capacity?, &rate()?),
        AlgorithmKind::LeakyBucket => Policy::leaky_bucket(spec.capacity?, &rate()?),
        AlgorithmKind::Gcra => Policy::gcra(&rate()?, spec.burst?),
        AlgorithmKind::Concurrency => Policy::concurrency(spec.limit?, &format!("{}us", spec.lease?)),
    })
}

/// The same policy as a policies document.
fn toml(spec: &PolicySpec) -> String {
    let mut text = format!("[policies.p]\nalgo = \"{}\"\n", spec.kind);
    if let Some(list) = &spec.strategies {
        let list: Vec<_> = list.iter().map(|s| format!("{}/{}us", s.limit, s.window_us)).collect();
        text += &format!("strategies = \"{}\"\n", list.join(","));
    }
    if let Some(p) = spec.precision {
        text += &format!("precision = \"{p}us\"\n");
    }
    if let Some(r) = spec.rate {
        text += &format!("rate = \"{}/{}us\"\n", r.count, r.period_us);
    }
    if let Some(c) = spec.capacity {
        text += &format!("capacity = {c}\n");
    }
    if let Some(b) = spec.burst {
        text += &format!("burst = {b}\n");
    }
    if let Some(l) = spec.limit {
        text += &format!("limit = {l}\n");
    }
    if let Some(l) = spec.lease {
        text += &format!("lease = \"{l}us\"\n");
    }
    text
}

/// Decides `policy` (peeks, for concurrency) at costs 0, its largest admissible, 1 and `u64::MAX` on
/// every store, each time under a limiter name of its own: no error, the
/// largest cost fits a fresh key exactly, and memory and Redis on the same
/// client clock decide alike.
fn decides_everywhere(policy: &Policy) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let s = stores();
    let max = policy.max_cost();
    let mut seen = Vec::new();
    // Redis's own clock runs between calls: a fast refill may admit the next one.
    for (store_name, store, still) in [
        ("memory", &s.memory, true),
        ("redis, client clock", &s.redis_client_clock, true),
        ("redis", &s.redis_server_clock, false),
    ] {
        let name = format!("case{}", CASE.fetch_add(1, Ordering::Relaxed));
        let limiter = Limiter::new(name, policy.clone(), store).with_deny_cache(false);
        let decisions = block_on(async {
            let mut decisions = Vec::new();
            // A concurrency limiter holds permits only through `acquire`: its checks are peeks.
            let concurrency = policy.algorithm() == AlgorithmKind::Concurrency;
            for cost in [0, max, 1, u64::MAX, 0] {
                let decision = match concurrency {
                    true => limiter.peek("k", cost).await,
                    false => limiter.check("k", cost).await,
                };
                let decision =
                    decision.map_err(|e| TestCaseError::fail(format!("{store_name} {policy} cost {cost}: {e}")))?;
                decisions.push(decision);
            }
            let peek = limiter
                .peek("k", 1)
                .await
                .map_err(|e| TestCaseError::fail(format!("{store_name} {policy} peek: {e}")))?;
            decisions.push(peek);
            Ok::<_, TestCaseError>(decisions)
        })?;
        let [zero, all, one, huge, zero_again, _] = &decisions[..] else { unreachable!() };
        for (d, what) in [(zero, "cost 0"), (zero_again, "cost 0 when full")] {
            prop_assert!(d.allowed, "{} {}: {} denied: {:?}", store_name, policy, what, d);
        }
        prop_assert!(all.allowed, "{} {}: cost {} on a fresh key denied: {:?}", store_name, policy, max, all);
        prop_assert!(all.remaining == 0, "{} {}: {:?}", store_name, policy, all);
        // A concurrency policy's peek holds nothing: a full one leaves every permit free.
        match policy.algorithm() {
            AlgorithmKind::Concurrency => prop_assert!(one.allowed, "{} {}: {:?}", store_name, policy, one),
            _ => prop_assert!(
                !still || (!one.allowed && one.retry_after.is_some()),
                "{} {}: {:?}",
                store_name,
                policy,
                one
            ),
        }
        prop_assert!(huge.can_never_pass(), "{} {}: {:?}", store_name, policy, huge);
        seen.push(decisions);
    }
    prop_assert_eq!(&seen[0], &seen[1], "{}: memory and Redis on one clock decide alike", policy);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A spec of any numbers: `from_spec`, the typed constructor and a
    /// policies document agree on whether it is a policy; it never panics;
    /// an accepted one decides on every store.
    #[test]
    fn any_numbers_build_a_policy_or_a_clear_error(spec in spec()) {
        let built = Policy::from_spec(spec.clone());
        let document = PolicySet::parse("p.toml", &toml(&spec));
        prop_assert_eq!(built.is_ok(), document.is_ok(), "{:?}: {:?} vs {:?}", spec, built, document);
        let stray = [Param::Strategies, Param::Precision, Param::Capacity, Param::Rate, Param::Burst, Param::Limit, Param::Lease]
            .into_iter()
            .any(|p| !spec.kind.params().contains(&p) && toml(&spec).contains(&format!("\n{} = ", p.name())));
        // A typed constructor has no place for a parameter its algorithm does not take.
        if let Some(typed) = typed(&spec).filter(|_| !stray) {
            prop_assert_eq!(built.is_ok(), typed.is_ok(), "{:?}: {:?} vs {:?}", spec, built, typed);
        }
        match built {
            Ok(policy) => decides_everywhere(&policy)?,
            Err(e) => prop_assert!(e.to_string().starts_with("invalid rate limit policy: "), "{}", e),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any text and any integer into each typed constructor: a policy or an error, never a panic.
    #[test]
    fn any_text_builds_a_policy_or_a_clear_error(
        text in prop_oneof![".{0,40}", "[0-9]{0,22}/[0-9]{0,22}(us|ms|s|m|h|d)?(,[0-9]{0,3}/[0-9]{0,3}s){0,2}"],
        other in prop_oneof![".{0,12}", "[0-9]{0,22}(us|ms|s)"],
        n in count(),
    ) {
        for result in [
            Policy::fixed_window(&text),
            Policy::sliding_window(&text, &other),
            Policy::sliding_log(&text),
            Policy::token_bucket(n, &text),
            Policy::leaky_bucket(n, &text),
            Policy::gcra(&text, n),
        ] {
            if let Err(e) = result {
                prop_assert!(e.to_string().len() < 1_000, "{}", e);
            }
        }
        let _ = PolicySet::parse("p.toml", &text);
        let _ = PolicySet::parse("p.toml", &format!("[policies.{other}]\nalgo = \"{text}\"\n"));
        let _ = KeyBy::header(&text);
        let _ = TrustedProxies::new([&text, &other]);
        let _ = KeyBy::client_ip(TrustedProxies::none()).ipv6_prefix(n as u8);
        let _ = AlgorithmKind::from_name(&text);
    }

    /// Any prefix, limiter name and key on the memory store: a decision, never a panic.
    #[test]
    fn any_prefix_name_and_key_decide(prefix in ".{0,20}", name in ".{0,20}", key in proptest::collection::vec(any::<u8>(), 0..200)) {
        let store = stores().memory.clone().with_prefix(&prefix);
        let limiter = Limiter::new(name, Policy::fixed_window("1/1h").unwrap(), &store);
        let decision = block_on(limiter.check(&key, 1));
        prop_assert!(decision.is_ok(), "{:?}", decision);
    }
}

/// The largest numbers each algorithm accepts, on both stores and both Redis clocks.
#[test]
fn the_largest_accepted_policies_decide_everywhere() {
    let largest = [
        Policy::fixed_window(&format!("{MAX_LIMIT}/366d")).unwrap(),
        Policy::fixed_window(&format!("{MAX_LIMIT}/1us,{MAX_LIMIT}/366d")).unwrap(),
        Policy::sliding_window(&format!("{MAX_LIMIT}/366d"), "1d").unwrap(),
        Policy::sliding_window(&format!("{MAX_LIMIT}/10000us"), "1us").unwrap(),
        Policy::sliding_log(&format!("{MAX_LIMIT}/366d")).unwrap(),
        Policy::token_bucket(MAX_LIMIT, "1099511627776/1us").unwrap(),
        Policy::token_bucket(1 << 30, "1/4194304us").unwrap(),
        Policy::leaky_bucket(MAX_LIMIT, "1/4096us").unwrap(),
        Policy::gcra("1099511627776/1us", MAX_LIMIT - 1).unwrap(),
        Policy::gcra("1/366d", 0).unwrap(),
    ];
    for policy in &largest {
        decides_everywhere(policy).unwrap_or_else(|e| panic!("{e}"));
    }
}
