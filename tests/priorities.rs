#![cfg(feature = "redis")]
//! Priorities: under a flood of low calls on one key, normal calls still
//! get what low ones may not take and critical calls the rest, exactly, in
//! every window or refill, for every rate algorithm and concurrency; on
//! both stores alike, one call at a time or batched (Redis's group commit);
//! refunds per class give back what their call took.
//!
//! `cargo test --test priorities`

use futures_util::future::join_all;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy, Priority, Store};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Every rate algorithm at a limit of 10 a second, keeping half from low
/// calls and a fifth from normal ones: low 5, normal 8, critical 10.
fn policies() -> Vec<Policy> {
    [
        Policy::fixed_window("10/1s"),
        Policy::fixed_window("10/1s,100/1h"),
        Policy::sliding_window("10/1s", "100ms"),
        Policy::sliding_log("10/1s"),
        Policy::token_bucket(10, "10/1s"),
        Policy::token_bucket_interval(10, "10/1s"),
        Policy::leaky_bucket(10, "10/1s"),
        Policy::gcra("10/1s", 9),
    ]
    .map(|p| p.unwrap().with_headroom(50, 20).unwrap())
    .into()
}

fn name(policy: &Policy) -> String {
    policy.to_string().replace(' ', "_")
}

/// Calls of `class` of cost 1 on `key`, `n` of them: how many passed.
async fn flood(limiter: &Limiter, class: Priority, key: &str, n: u32) -> u32 {
    let limiter = limiter.with_priority(class);
    let mut passed = 0;
    for _ in 0..n {
        passed += limiter.check(key, 1).await.unwrap().allowed as u32;
    }
    passed
}

#[tokio::test]
async fn under_a_flood_of_low_calls_each_class_gets_its_share_every_window() {
    let both = BothStores::start().await;
    for policy in policies() {
        for (store_name, store) in both.each() {
            let limiter = Limiter::new(name(&policy), policy.clone(), store);
            for round in 0..4 {
                let low = flood(&limiter, Priority::Low, "k", 50).await;
                let normal = flood(&limiter, Priority::Normal, "k", 50).await;
                let critical = flood(&limiter, Priority::Critical, "k", 50).await;
                assert_eq!((low, normal, critical), (5, 3, 2), "{policy} on {store_name}, round {round}");
                let later_low = flood(&limiter, Priority::Low, "k", 5).await;
                assert_eq!(later_low, 0, "{policy} on {store_name}: nothing left for low, round {round}");
                // A second: every window has ended, every bucket refilled.
                both.clock.advance(Duration::from_secs(1));
            }
        }
    }
}

#[tokio::test]
async fn partly_refilled_each_class_sees_only_what_is_above_its_headroom() {
    let both = BothStores::start().await;
    for policy in [Policy::token_bucket(10, "10/1s"), Policy::leaky_bucket(10, "10/1s"), Policy::gcra("10/1s", 9)] {
        let policy = policy.unwrap().with_headroom(50, 20).unwrap();
        for (store_name, store) in both.each() {
            let limiter = Limiter::new(format!("partly-{}", name(&policy)), policy.clone(), store);
            assert_eq!(flood(&limiter, Priority::Critical, "k", 10).await, 10);
            for step in 0..5 {
                // 300 ms pays off 3: low still sees none of it, normal 1, critical all 3.
                both.clock.advance(Duration::from_millis(300));
                let low = flood(&limiter, Priority::Low, "k", 10).await;
                let normal = flood(&limiter, Priority::Normal, "k", 10).await;
                let critical = flood(&limiter, Priority::Critical, "k", 10).await;
                assert_eq!((low, normal, critical), (0, 1, 2), "{policy} on {store_name}, step {step}");
            }
        }
    }
}

#[tokio::test]
async fn a_decision_describes_its_own_class() {
    let both = BothStores::start().await;
    let policy = Policy::fixed_window("10/1m").unwrap().with_headroom(50, 20).unwrap();
    for (store_name, store) in both.each() {
        let limiter = Limiter::new("own-class", policy.clone(), store);
        flood(&limiter, Priority::Low, "k", 3).await;
        let fields = |d: Decision| (d.allowed, d.limit, d.remaining);
        let low = limiter.with_priority(Priority::Low);
        assert_eq!(fields(low.peek("k", 1).await.unwrap()), (true, 5, 1), "{store_name}");
        assert_eq!(fields(limiter.with_priority(Priority::Normal).peek("k", 1).await.unwrap()), (true, 8, 4));
        assert_eq!(fields(limiter.with_priority(Priority::Critical).peek("k", 1).await.unwrap()), (true, 10, 6));
        assert_eq!(fields(low.check("k", 3).await.unwrap()), (false, 5, 2), "{store_name}: 3 more would pass half");
        assert_eq!(low.policy().to_string(), "fixed_window 5/1m");
        assert_eq!(limiter.priority(), Priority::Normal);
    }
}

#[tokio::test]
async fn concurrency_keeps_permits_for_higher_classes() {
    let both = BothStores::start().await;
    let policy = Policy::concurrency(10, "30s").unwrap().with_headroom(50, 20).unwrap();
    for (store_name, store) in both.each() {
        let limiter = Limiter::new("prio-concurrency", policy.clone(), store);
        for round in 0..3 {
            let mut held = Vec::new();
            let mut passed = [0; 3];
            for (at, class) in Priority::ALL.into_iter().enumerate() {
                let classed = limiter.with_priority(class);
                for _ in 0..20 {
                    if let Ok(permit) = classed.acquire("k").await {
                        assert_eq!(permit.decision().limit, classed.policy().max_cost());
                        held.push(permit);
                        passed[at] += 1;
                    }
                }
            }
            assert_eq!(passed, [5, 3, 2], "{store_name}, round {round}");
            for permit in held {
                permit.release().await.unwrap();
            }
            // Moving time changes nothing for held permits; released ones all came back.
            both.clock.advance(Duration::from_secs(5));
        }
    }
}

#[tokio::test]
async fn refunds_give_back_what_their_call_took_in_each_class() {
    let both = BothStores::start().await;
    for policy in [
        Policy::fixed_window("10/1m"),
        Policy::token_bucket(10, "1/1h"),
        Policy::leaky_bucket(10, "1/1h"),
        Policy::gcra("1/1h", 9),
    ] {
        let policy = policy.unwrap().with_headroom(50, 20).unwrap();
        for (store_name, store) in both.each() {
            let limiter = Limiter::new(format!("refunds-{}", name(&policy)), policy.clone(), store);
            let (low, critical) = (limiter.with_priority(Priority::Low), limiter.with_priority(Priority::Critical));
            let taken = low.check("k", 4).await.unwrap();
            assert!(taken.allowed);
            // The low call's 4 back, not more: low may take 5 again.
            let after = low.refund("k", 9, &taken).await.unwrap();
            assert_eq!((after.limit, after.remaining), (5, 5), "{policy} on {store_name}");
            assert_eq!(flood(&limiter, Priority::Low, "k", 10).await, 5, "{policy} on {store_name}");
            let rest = critical.check("k", 5).await.unwrap();
            assert_eq!((rest.allowed, rest.remaining), (true, 0), "{policy} on {store_name}");
            // A critical call's refund frees room above low's share only: low sees none of it.
            let after = critical.refund("k", 2, &rest).await.unwrap();
            assert_eq!((after.limit, after.remaining), (10, 2), "{policy} on {store_name}");
            assert!(!low.check("k", 1).await.unwrap().allowed, "{policy} on {store_name}");
        }
    }
}

/// A seeded timeline of classes, costs and steps: both stores answer alike
/// (the deny cache off: it answers a repeated denial with the `remaining`
/// the store gave then, and only a remote store's denials are cached).
#[tokio::test]
async fn memory_and_redis_agree_on_mixed_classes() {
    let both = BothStores::start().await;
    let seed = 0x5eed_c1a5;
    for policy in policies() {
        let limiters = both.each().map(|(_, store)| {
            Limiter::new(format!("mixed-{}", name(&policy)), policy.clone(), store).with_deny_cache(false)
        });
        let mut rng = SmallRng::seed_from_u64(seed);
        for step in 0..200 {
            let class = Priority::ALL[rng.random_range(0..3)];
            let cost = rng.random_range(0..4);
            let classed = limiters.each_ref().map(|l| l.with_priority(class));
            let answers = join_all(classed.iter().map(|l| l.check("k", cost))).await;
            let [memory, redis] = [&answers[0], &answers[1]].map(|a| a.as_ref().unwrap().clone());
            assert_eq!(memory, redis, "{policy}, seed {seed:#x}, step {step}: {class} cost {cost}");
            both.clock.advance(Duration::from_micros(rng.random_range(0..300_000)));
        }
    }
}

/// Calls of every class on one key, sent together: Redis's group commit
/// batches them, and every answer is the one the same calls get one at a time.
#[tokio::test]
async fn batched_calls_answer_as_single_calls() {
    let both = BothStores::start().await;
    for policy in policies() {
        let batched =
            Limiter::new(format!("batched-{}", name(&policy)), policy.clone(), &both.redis).with_deny_cache(false);
        let single =
            Limiter::new(format!("single-{}", name(&policy)), policy.clone(), &both.redis).with_deny_cache(false);
        let memory = Limiter::new(format!("single-{}", name(&policy)), policy.clone(), &both.memory);
        let classes: Vec<Priority> = (0..30).map(|i| Priority::ALL[(i * 7 + i / 3) % 3]).collect();
        for round in 0..3 {
            let limiters: Vec<Limiter> = classes.iter().map(|c| batched.with_priority(*c)).collect();
            let together = join_all(limiters.iter().map(|l| l.check("k", 1))).await;
            for (i, class) in classes.iter().enumerate() {
                let one = single.with_priority(*class).check("k", 1).await.unwrap();
                assert_eq!(together[i].as_ref().unwrap(), &one, "{policy}, round {round}, call {i} ({class})");
                assert_eq!(memory.with_priority(*class).check("k", 1).await.unwrap(), one, "{policy}: memory");
            }
            let passed = together.iter().filter(|d| d.as_ref().unwrap().allowed).count();
            assert!(passed <= 10, "{policy}: never more than the limit");
            both.clock.advance(Duration::from_secs(1));
        }
    }
}

#[test]
fn a_policy_with_headroom_reads_back_its_text() {
    for text in [
        "fixed_window 100/1m headroom low 50% normal 20%",
        "sliding_window 10/1s precision 100ms headroom low 30%",
        "token_bucket capacity 40 rate 1/1m headroom low 20% normal 20% dry_run",
        "gcra 10/1s burst 9 headroom low 50% normal 10%",
        "concurrency limit 10 lease 30s headroom low 50% normal 20%",
    ] {
        let policy: Policy = text.parse().unwrap();
        assert_eq!(policy.to_string(), text);
        assert_eq!(policy.to_string().parse::<Policy>().unwrap(), policy);
    }
    let plain = Policy::fixed_window("100/1m").unwrap();
    assert_ne!(plain.clone().with_headroom(50, 20).unwrap(), plain, "headroom limits differently");
    for (text, why) in [
        ("fixed_window 1/1m headroom low 50%", "leaves low calls no permit"),
        ("fixed_window 10/1m headroom low 10% normal 20%", "at least as much as normal"),
        ("fixed_window 10/1m headroom", "`headroom` takes"),
        ("fixed_window 10/1m headroom low 120%", "more than the whole limit"),
    ] {
        let error = text.parse::<Policy>().unwrap_err().to_string();
        assert!(error.contains(why), "{text}: {error}");
    }
}

#[test]
fn a_policies_file_takes_headroom() {
    let set = redlimit::policies::PolicySet::parse(
        "policies.toml",
        "[policies.search]\nalgo = \"gcra\"\nrate = \"10/1s\"\nheadroom = \"low 50%, normal 20%\"\n\
         [policies.export]\nalgo = \"concurrency\"\nlimit = 4\nheadroom = \"low 75%\"\n",
    )
    .unwrap();
    let search = set.get("search").unwrap();
    assert_eq!(search.to_string(), "gcra 10/1s burst 9 headroom low 50% normal 20%");
    assert_eq!(search.for_priority(Priority::Low).max_cost(), 5);
    assert_eq!(set.get("export").unwrap().for_priority(Priority::Low).max_cost(), 1);
    let error = redlimit::policies::PolicySet::parse(
        "policies.toml",
        "[policies.search]\nalgo = \"gcra\"\nrate = \"1/1s\"\nheadroom = \"low 50%\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("leaves low calls no permit"), "{error}");
}

#[tokio::test]
async fn a_limiter_without_headroom_decides_every_class_alike() {
    let store = Store::memory();
    let limiter = Limiter::new("plain", Policy::fixed_window("2/1m").unwrap(), &store);
    assert_eq!(flood(&limiter, Priority::Low, "k", 5).await, 2);
    assert_eq!(flood(&limiter, Priority::Critical, "k", 5).await, 0);
}

#[tokio::test]
async fn a_request_sees_the_fields_of_its_own_class() {
    use axum::{body::Body, extract::Request, routing::get, Router};
    use redlimit::http::{KeyBy, RateLimitLayer};
    use tower_service::Service;

    let both = BothStores::start().await;
    let policy = Policy::fixed_window("10/1m").unwrap().with_headroom(50, 20).unwrap();
    for (store_name, store) in both.each() {
        let limiter = Limiter::new("http-classes", policy.clone(), store);
        let layer = RateLimitLayer::from_limiter(limiter).key(KeyBy::header("x-api-key").unwrap()).priority_by(
            |request: &Request| match request.headers().get("x-class").map(|v| v.as_bytes()) {
                Some(b"low") => Priority::Low,
                Some(b"critical") => Priority::Critical,
                _ => Priority::Normal,
            },
        );
        let mut app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
        let mut ask = async |class: &str| {
            let request = Request::builder().uri("/").header("x-api-key", "k").header("x-class", class);
            let response = app.call(request.body(Body::empty()).unwrap()).await.unwrap();
            let field = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
            (response.status().as_u16(), field("ratelimit"), field("ratelimit-policy"))
        };
        for i in 0..5 {
            let (status, fields, _) = ask("low").await;
            assert_eq!((status, fields), (200, Some(format!("\"5/1m\";r={};t=60", 4 - i))), "{store_name}");
        }
        let (status, fields, quota) = ask("low").await;
        assert_eq!(status, 429, "{store_name}");
        assert_eq!(fields.as_deref(), Some("\"5/1m\";r=0;t=60"), "{store_name}");
        assert_eq!(quota.as_deref(), Some("\"5/1m\";q=5;w=60"), "{store_name}");
        let normal = ask("normal").await;
        assert_eq!((normal.0, normal.1.as_deref()), (200, Some("\"8/1m\";r=2;t=60")), "{store_name}");
        let critical = ask("critical").await;
        assert_eq!((critical.0, critical.1.as_deref()), (200, Some("\"10/1m\";r=3;t=60")), "{store_name}");
    }
}

/// Prefetched permits are one class's: a class's rule is a policy of its
/// own, so permits taken under one are never spent under another, and a
/// call of another class gives them back before it refills.
#[tokio::test]
async fn prefetch_keeps_each_class_to_its_share() {
    let both = BothStores::start().await;
    for policy in [Policy::fixed_window("10/1m"), Policy::token_bucket(10, "1/1h"), Policy::gcra("1/1h", 9)] {
        let policy = policy.unwrap().with_headroom(50, 20).unwrap();
        for (store_name, store) in both.each() {
            let limiter =
                Limiter::new(format!("prefetch-{}", name(&policy)), policy.clone(), store).with_prefetch(8).unwrap();
            let low = flood(&limiter, Priority::Low, "k", 50).await;
            let critical = flood(&limiter, Priority::Critical, "k", 50).await;
            assert_eq!((low, critical), (5, 5), "{policy} on {store_name}");
            // Interleaved, from a fresh key: low never passes its half, critical takes the rest.
            let mut passed = [0; 3];
            for i in 0..60 {
                let class = Priority::ALL[i % 3];
                passed[i % 3] += limiter.with_priority(class).check("fresh", 1).await.unwrap().allowed as u32;
            }
            assert!(passed[0] <= 5 && passed[0] + passed[1] <= 8, "{policy} on {store_name}: {passed:?}");
            assert_eq!(passed.iter().sum::<u32>(), 10, "{policy} on {store_name}: {passed:?}");
        }
    }
}

#[tokio::test]
async fn a_trial_with_headroom_counts_each_class_on_its_own_state() {
    let store = Store::memory();
    let policy = Policy::fixed_window("10/1m").unwrap().with_headroom(50, 20).unwrap();
    let enforced = Limiter::new("trial-classes", policy.clone(), &store);
    let trial = enforced.with_priority(Priority::Low).with_dry_run(true);
    assert_eq!(trial.priority(), Priority::Low);
    let mut would_pass = 0;
    for _ in 0..10 {
        let d = trial.limit("k", 1).await.expect("a dry run never denies");
        assert_eq!(d.limit, 5, "the trial decides as its class");
        would_pass += d.allowed as u32;
    }
    assert_eq!(would_pass, 5);
    let critical = enforced.with_priority(Priority::Critical).check("k", 0).await.unwrap();
    assert_eq!(critical.remaining, 10, "the trial took none of the enforced permits");
    assert_eq!(trial.with_dry_run(false).check("k", 0).await.unwrap().limit, 5, "out of dry run, still low");
}
