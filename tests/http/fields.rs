//! The exact `RateLimit-Policy`, `RateLimit` and `Retry-After` of every
//! algorithm, sub-second windows and buckets included, read back with a
//! structured-fields parser, call by call on a manual clock: on the memory
//! store, and on Redis with the same clock.
//!
//! What each row shows: `q` is what may be sent at once; `r` what may be
//! sent now and `t` how long no more than that is available (a bucket's next
//! token, not its full refill); `Retry-After` is never earlier than the `t`
//! of a rule that denied the call.

use axum::http::HeaderMap;
use redlimit::http::{insert_rate_limit_headers_in, rate_limit_headers, HeaderStyle, QuotaUnit};
use redlimit::policies::PolicySet;
use redlimit::{Clock, Limiter, ManualClock, Policy, Store};
use redlimit_test_support::http::{integer_items, list_items};
use std::time::Duration;

/// One call: advance the clock by `ms`, take `cost`; then the expected
/// `RateLimit` items `(name, r, t)` and `Retry-After`.
type Step = (u64, u64, &'static [(&'static str, i64, i64)], Option<i64>);

struct Case {
    policy: Policy,
    /// The expected `RateLimit-Policy` items `(name, q, w)`.
    advertised: &'static [(&'static str, i64, i64)],
    steps: &'static [Step],
}

fn cases() -> Vec<Case> {
    vec![
        // The bucket of the report: each token comes 3 s after the last, so t = 3 whatever r is.
        Case {
            policy: Policy::token_bucket(3, "1/3s").unwrap(),
            advertised: &[("token_bucket 3 per 1/3s", 3, 9)],
            steps: &[
                (0, 1, &[("token_bucket 3 per 1/3s", 2, 3)], None),
                (0, 1, &[("token_bucket 3 per 1/3s", 1, 3)], None),
                (0, 1, &[("token_bucket 3 per 1/3s", 0, 3)], None),
                (0, 1, &[("token_bucket 3 per 1/3s", 0, 3)], Some(3)),
                // Half a token back: the next whole one in 1.5 s.
                (1_500, 1, &[("token_bucket 3 per 1/3s", 0, 2)], Some(2)),
                (1_500, 1, &[("token_bucket 3 per 1/3s", 0, 3)], None),
            ],
        },
        // Refilled in 100 ms: only the capacity can be sent at once.
        Case {
            policy: Policy::token_bucket(10, "100/1s").unwrap(),
            advertised: &[("token_bucket 10 per 100/1s", 10, 1)],
            steps: &[
                (0, 10, &[("token_bucket 10 per 100/1s", 0, 1)], None),
                (0, 1, &[("token_bucket 10 per 100/1s", 0, 1)], Some(1)),
                (10, 1, &[("token_bucket 10 per 100/1s", 0, 1)], None),
                (1_000, 1, &[("token_bucket 10 per 100/1s", 9, 1)], None),
            ],
        },
        Case {
            policy: Policy::leaky_bucket(2, "1/2s").unwrap(),
            advertised: &[("leaky_bucket 2 per 1/2s", 2, 4)],
            steps: &[
                (0, 1, &[("leaky_bucket 2 per 1/2s", 1, 2)], None),
                (0, 1, &[("leaky_bucket 2 per 1/2s", 0, 2)], None),
                (0, 1, &[("leaky_bucket 2 per 1/2s", 0, 2)], Some(2)),
                (500, 1, &[("leaky_bucket 2 per 1/2s", 0, 2)], Some(2)),
                (1_500, 1, &[("leaky_bucket 2 per 1/2s", 0, 2)], None),
            ],
        },
        Case {
            policy: Policy::gcra("1/1s", 2).unwrap(),
            advertised: &[("gcra 1/1s burst 2", 3, 3)],
            steps: &[
                (0, 1, &[("gcra 1/1s burst 2", 2, 1)], None),
                (0, 1, &[("gcra 1/1s burst 2", 1, 1)], None),
                (0, 1, &[("gcra 1/1s burst 2", 0, 1)], None),
                (0, 1, &[("gcra 1/1s burst 2", 0, 1)], Some(1)),
                // Two at once need 1.75 s more; the next single one 0.75 s.
                (250, 2, &[("gcra 1/1s burst 2", 0, 1)], Some(2)),
            ],
        },
        // One every 100 ms: one at once per second is what is promised.
        Case {
            policy: Policy::gcra("10/1s", 0).unwrap(),
            advertised: &[("gcra 10/1s burst 0", 1, 1)],
            steps: &[
                (0, 1, &[("gcra 10/1s burst 0", 0, 1)], None),
                (0, 1, &[("gcra 10/1s burst 0", 0, 1)], Some(1)),
                (100, 1, &[("gcra 10/1s burst 0", 0, 1)], None),
            ],
        },
        // A sub-second window: 10 at once, not 100 a second.
        Case {
            policy: Policy::fixed_window("10/100ms").unwrap(),
            advertised: &[("10/100ms", 10, 1)],
            steps: &[(0, 10, &[("10/100ms", 0, 1)], None), (50, 1, &[("10/100ms", 0, 1)], Some(1))],
        },
        Case {
            policy: Policy::fixed_window("2/10s,3/1m").unwrap(),
            advertised: &[("2/10s", 2, 10), ("3/1m", 3, 60)],
            steps: &[
                (0, 1, &[("2/10s", 1, 10), ("3/1m", 2, 60)], None),
                (1_000, 1, &[("2/10s", 0, 9), ("3/1m", 1, 59)], None),
                (1_000, 1, &[("2/10s", 0, 8), ("3/1m", 1, 58)], Some(8)),
                (8_000, 1, &[("2/10s", 1, 10), ("3/1m", 0, 50)], None),
                // Denied by the minute alone: the 10 s rule keeps its own t.
                (0, 1, &[("2/10s", 1, 10), ("3/1m", 0, 50)], Some(50)),
            ],
        },
        Case {
            policy: Policy::sliding_log("3/1m").unwrap(),
            advertised: &[("3/1m", 3, 60)],
            steps: &[
                (0, 1, &[("3/1m", 2, 60)], None),
                (10_000, 1, &[("3/1m", 1, 60)], None),
                (10_000, 1, &[("3/1m", 0, 60)], None),
                // The first call leaves at 60 s: 30 s from now, not 40.
                (10_000, 1, &[("3/1m", 0, 30)], Some(30)),
            ],
        },
        Case {
            policy: Policy::sliding_log("10/1500ms").unwrap(),
            advertised: &[("10/1500ms", 10, 2)],
            steps: &[(0, 10, &[("10/1500ms", 0, 2)], None), (1_000, 1, &[("10/1500ms", 0, 1)], Some(1))],
        },
        Case {
            policy: Policy::sliding_window("4/1s", "250ms").unwrap(),
            advertised: &[("4/1s", 4, 1)],
            steps: &[
                (0, 3, &[("4/1s", 1, 1)], None),
                (500, 1, &[("4/1s", 0, 1)], None),
                (250, 1, &[("4/1s", 0, 1)], Some(1)),
            ],
        },
        Case {
            policy: Policy::sliding_window("5/1m", "10s").unwrap(),
            advertised: &[("5/1m", 5, 60)],
            steps: &[
                (0, 4, &[("5/1m", 1, 60)], None),
                (25_000, 1, &[("5/1m", 0, 55)], None),
                // The first sub-window leaves at 60 s.
                (10_000, 1, &[("5/1m", 0, 25)], Some(25)),
            ],
        },
    ]
}

fn retry_after(headers: &HeaderMap) -> Option<i64> {
    let value = headers.get("retry-after")?;
    let text = value.to_str().unwrap();
    assert!(!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()), "Retry-After {text:?}: delay-seconds");
    Some(text.parse().unwrap())
}

fn owned(items: &[(&str, i64, i64)]) -> Vec<(String, i64, i64)> {
    items.iter().map(|&(n, a, b)| (n.to_owned(), a, b)).collect()
}

/// Runs every case on `store` (driven by `clock`), each under its own limiter name.
async fn run_table(store: &Store, clock: &ManualClock, store_name: &str) {
    for (c, case) in cases().into_iter().enumerate() {
        let limiter = Limiter::new(format!("fields_{c}_{store_name}"), case.policy.clone(), store);
        // Each case starts on a whole hour, where sub-windows are aligned.
        let hour = 3_600_000_000;
        clock.set_us((clock.now_us().unwrap() / hour + 1) * hour);
        for (s, &(advance_ms, cost, expected, expected_retry)) in case.steps.iter().enumerate() {
            clock.advance(Duration::from_millis(advance_ms));
            let decision = limiter.check("k", cost).await.unwrap();
            let headers = rate_limit_headers(limiter.policy(), &decision, HeaderStyle::Draft);
            let at = format!("{store_name}: {} step {s}", case.policy);
            assert_eq!(integer_items(&headers, "ratelimit-policy", ["q", "w"]), owned(case.advertised), "{at}");
            let state = integer_items(&headers, "ratelimit", ["r", "t"]);
            assert_eq!(state, owned(expected), "{at}");
            let retry = retry_after(&headers);
            assert_eq!(retry, expected_retry, "{at}");
            assert_eq!(retry.is_some(), !decision.allowed, "{at}: Retry-After exactly on a denial");
            // A rule with less room than the cost denied the call: obeying
            // Retry-After never comes back before its t.
            if let Some(retry) = retry {
                for (name, r, t) in &state {
                    if (*r as u64) < cost {
                        assert!(retry >= *t, "{at}: Retry-After {retry} before {name}'s t={t}");
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn every_algorithm_on_the_memory_store() {
    let clock = ManualClock::new();
    run_table(&Store::memory().with_clock(clock.clone()), &clock, "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn every_algorithm_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    run_table(&stores.redis, &stores.clock, "redis").await;
}

#[tokio::test]
async fn configured_policies_name_their_items_and_several_strategies_add_the_strategy() {
    let set = PolicySet::parse(
        "inline",
        "[policies.search]\nalgo = \"sliding_log\"\nstrategies = \"2/1s,10/1m\"\n\
         [policies.login]\nalgo = \"gcra\"\nrate = \"1/1s\"\nburst = 1\n",
    )
    .unwrap();
    let store = Store::memory().with_clock(ManualClock::new());
    let search = Limiter::new("api", set.get("search").unwrap().clone(), &store);
    let headers = rate_limit_headers(search.policy(), &search.check("k", 1).await.unwrap(), HeaderStyle::Draft);
    assert_eq!(
        integer_items(&headers, "ratelimit-policy", ["q", "w"]),
        owned(&[("search:2/1s", 2, 1), ("search:10/1m", 10, 60)])
    );
    assert_eq!(
        integer_items(&headers, "ratelimit", ["r", "t"]),
        owned(&[("search:2/1s", 1, 1), ("search:10/1m", 9, 60)])
    );

    let login = Limiter::new("api", set.get("login").unwrap().clone(), &store);
    let headers = rate_limit_headers(login.policy(), &login.check("k", 1).await.unwrap(), HeaderStyle::Draft);
    assert_eq!(integer_items(&headers, "ratelimit-policy", ["q", "w"]), owned(&[("login", 2, 2)]));
    assert_eq!(integer_items(&headers, "ratelimit", ["r", "t"]), owned(&[("login", 1, 1)]));
}

#[tokio::test]
async fn a_cost_in_content_bytes_states_its_unit() {
    let store = Store::memory().with_clock(ManualClock::new());
    let limiter = Limiter::new("uploads", Policy::token_bucket(65_536, "1024/1s").unwrap(), &store);
    let decision = limiter.check("k", 4096).await.unwrap();
    let mut headers = HeaderMap::new();
    insert_rate_limit_headers_in(
        &mut headers,
        limiter.policy(),
        &decision,
        HeaderStyle::Draft,
        QuotaUnit::ContentBytes,
    );
    let items = list_items(&headers, "ratelimit-policy");
    let params = [("q", "65536"), ("w", "64"), ("qu", r#""content-bytes""#)].map(|(k, v)| (k.to_owned(), v.to_owned()));
    assert_eq!(items, [("token_bucket 65536 per 1024/1s".to_owned(), params.to_vec())]);
    // 4096 bytes spent, each back in under a millisecond: t is one second.
    assert_eq!(
        integer_items(&headers, "ratelimit", ["r", "t"]),
        owned(&[("token_bucket 65536 per 1024/1s", 61_440, 1)])
    );
}

/// A concurrency policy's items, permit by permit: `q` with
/// `qu="concurrent-requests"` and no `w`; `r` with no `t`; no `Retry-After`
/// and no `X-RateLimit-Reset`, since a permit comes back when its holder
/// ends. A caller's unit does not replace it.
async fn concurrency_rows(store: &Store, store_name: &str) {
    let limiter =
        Limiter::new(format!("fields_concurrency_{store_name}"), Policy::concurrency(3, "30s").unwrap(), store);
    let params = |headers: &HeaderMap, field: &str| -> Vec<(String, String)> {
        let [(name, params)] = <[_; 1]>::try_from(list_items(headers, field)).unwrap();
        assert_eq!(name, "concurrency 3", "{store_name}");
        params
    };
    let owned = |pairs: &[(&str, &str)]| pairs.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>();
    let advertised = owned(&[("q", "3"), ("qu", r#""concurrent-requests""#)]);
    let mut held = Vec::new();
    for (step, r) in ["2", "1", "0", "0"].into_iter().enumerate() {
        let at = format!("{store_name}: permit {step}");
        let decided = match limiter.acquire("k").await {
            Ok(permit) => {
                let decision = permit.decision().clone();
                held.push(permit);
                decision
            }
            Err(denied) => denied.decision().clone(),
        };
        assert_eq!(decided.allowed, step < 3, "{at}");
        let headers = rate_limit_headers(limiter.policy(), &decided, HeaderStyle::DraftAndLegacy);
        assert_eq!(params(&headers, "ratelimit-policy"), advertised, "{at}");
        assert_eq!(params(&headers, "ratelimit"), owned(&[("r", r)]), "{at}");
        assert_eq!(retry_after(&headers), None, "{at}");
        assert!(headers.get("x-ratelimit-reset").is_none(), "{at}");
        assert_eq!(headers["x-ratelimit-remaining"], r, "{at}");
    }
    let mut headers = HeaderMap::new();
    let decision = held[0].decision();
    insert_rate_limit_headers_in(&mut headers, limiter.policy(), decision, HeaderStyle::Draft, QuotaUnit::ContentBytes);
    assert_eq!(params(&headers, "ratelimit-policy"), advertised, "{store_name}: its own unit");
}

#[tokio::test]
async fn a_concurrency_policy_on_the_memory_store() {
    concurrency_rows(&Store::memory().with_clock(ManualClock::new()), "memory").await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_concurrency_policy_on_redis() {
    let stores = redlimit_test_support::stores::BothStores::start().await;
    concurrency_rows(&stores.redis, "redis").await;
}
