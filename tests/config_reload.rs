#![cfg(feature = "redis")]
//! Reloading policies: a changed limit applies to the next call and keeps the
//! state that still fits (a window's counts, a bucket's debt, converted to a
//! new rate); state that cannot fit (another algorithm, another sub-window
//! precision) is never misread. On both backends.
//!
//! An annotated function reloads by building a new limiter with the same
//! name and the new policy on the same store; these tests do exactly that.
//!
//! `cargo test --test config_reload`

use redis::AsyncCommands;
use redlimit::policies::{self, PolicySet};
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

fn policy(body: &str) -> Policy {
    PolicySet::parse("policies.toml", &format!("[policies.p]\n{body}")).unwrap().get("p").unwrap().clone()
}

async fn take(store: &Store, policy: &Policy, n: u64) -> Limiter {
    let limiter = Limiter::new("reload", policy.clone(), store);
    for i in 0..n {
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{policy}: call {i}");
    }
    limiter
}

#[tokio::test]
async fn a_larger_limit_keeps_the_count_and_a_smaller_one_denies() {
    let both = BothStores::start().await;
    // (10 allowed, then 20, then 5): 7 used stays 7 used.
    let cases = [
        (
            "algo = \"fixed_window\"\nstrategies = \"10/1h\"",
            "algo = \"fixed_window\"\nstrategies = \"20/1h\"",
            "algo = \"fixed_window\"\nstrategies = \"5/1h\"",
        ),
        (
            "algo = \"sliding_window\"\nstrategies = \"10/1h\"\nprecision = \"1m\"",
            "algo = \"sliding_window\"\nstrategies = \"20/1h\"\nprecision = \"1m\"",
            "algo = \"sliding_window\"\nstrategies = \"5/1h\"\nprecision = \"1m\"",
        ),
        (
            "algo = \"sliding_log\"\nstrategies = \"10/1h\"",
            "algo = \"sliding_log\"\nstrategies = \"20/1h\"",
            "algo = \"sliding_log\"\nstrategies = \"5/1h\"",
        ),
        (
            "algo = \"leaky_bucket\"\ncapacity = 10\nrate = \"1/1h\"",
            "algo = \"leaky_bucket\"\ncapacity = 20\nrate = \"1/1h\"",
            "algo = \"leaky_bucket\"\ncapacity = 5\nrate = \"1/1h\"",
        ),
        (
            "algo = \"gcra\"\nrate = \"1/1h\"\nburst = 9",
            "algo = \"gcra\"\nrate = \"1/1h\"\nburst = 19",
            "algo = \"gcra\"\nrate = \"1/1h\"\nburst = 4",
        ),
    ];
    for (backend, store) in both.each() {
        for (ten, twenty, five) in cases {
            let (ten, twenty, five) = (policy(ten), policy(twenty), policy(five));
            take(store, &ten, 7).await;

            let raised = Limiter::new("reload", twenty.clone(), store);
            let now = raised.check("k", 0).await.unwrap();
            assert_eq!((now.limit, now.remaining), (20, 13), "{backend}: {ten} -> {twenty}");
            assert_eq!(raised.check("k", 1).await.unwrap().remaining, 12, "{backend}: {twenty}");

            let lowered = Limiter::new("reload", five.clone(), store);
            let denied = lowered.check("k", 1).await.unwrap();
            assert!(!denied.allowed, "{backend}: {twenty} -> {five}: 8 used of 5");
            assert_eq!((denied.limit, denied.remaining), (5, 0), "{backend}: {five}");
            lowered.reset("k").await.unwrap();
        }
    }
}

/// A bucket keeps what it owes (permits taken and not yet refilled or
/// drained), whatever its new capacity and rate: 7 taken of 10 leaves 13 of
/// 20, and none of 2 (owing at most the full bucket). A new rate counts the
/// same permits owed in its own units, and refills at its own pace from the
/// first call that writes under it.
#[tokio::test]
async fn a_bucket_keeps_what_it_owes() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for algo in ["token_bucket", "leaky_bucket", "gcra"] {
            let policy = |capacity: u64, rate: &str| match algo {
                "token_bucket" => Policy::token_bucket(capacity, rate).unwrap(),
                "leaky_bucket" => Policy::leaky_bucket(capacity, rate).unwrap(),
                _ => Policy::gcra(rate, capacity - 1).unwrap(),
            };
            take(store, &policy(10, "1/1h"), 7).await;
            let raised = Limiter::new("reload", policy(20, "1/1h"), store);
            assert_eq!(raised.check("k", 0).await.unwrap().remaining, 13, "{backend} {algo}");
            let faster = Limiter::new("reload", policy(20, "7/1m"), store);
            assert_eq!(faster.check("k", 1).await.unwrap().remaining, 12, "{backend} {algo}: the same permits owed");
            both.clock.advance(Duration::from_secs(60));
            assert_eq!(faster.check("k", 0).await.unwrap().remaining, 19, "{backend} {algo}: refilled at 7/1m");
            let back = take(store, &policy(10, "1/1h"), 7).await;
            assert_eq!(back.check("k", 0).await.unwrap().remaining, 2, "{backend} {algo}: 1 owed, then 7 more");
            let lowered = Limiter::new("reload", policy(2, "1/1h"), store);
            let denied = lowered.check("k", 1).await.unwrap();
            assert_eq!((denied.allowed, denied.remaining), (false, 0), "{backend} {algo}");
            lowered.reset("k").await.unwrap();
        }
    }
}

/// Another algorithm keeps another state: the new policy starts from a
/// fresh key instead of misreading the old one, which stays untouched
/// (switching back finds it as it was). A sliding window's precision is no
/// layout: its counts carry (tests/plans/sliding_window_precision_change.rs).
#[tokio::test]
async fn a_changed_layout_starts_fresh_and_leaves_the_old_state_alone() {
    let both = BothStores::start().await;
    let changes = [
        // another algorithm
        (
            Policy::fixed_window("10/1h").unwrap(),
            Policy::sliding_log("10/1h").unwrap(),
            "redlimit:fixed_window/v3:6:reload:k",
            "redlimit:sliding_log/v3:6:reload:k",
        ),
    ];
    let mut redis = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    for (backend, store) in both.each() {
        for (old, new, old_key, new_key) in &changes {
            let before = take(store, old, 7).await;
            let after = Limiter::new("reload", new.clone(), store);
            let fresh = after.check("k", 1).await.unwrap();
            assert_eq!(fresh.remaining, 9, "{backend}: {old} -> {new}: a fresh state, not the old one misread");
            assert_eq!(before.check("k", 0).await.unwrap().remaining, 3, "{backend}: {old}: the old state is intact");
            if backend == "redis" {
                let keys: (bool, bool) = (redis.exists(*old_key).await.unwrap(), redis.exists(*new_key).await.unwrap());
                assert_eq!(keys, (true, true), "{old_key} and {new_key}");
            }
            before.reset("k").await.unwrap();
            after.reset("k").await.unwrap();
        }
    }
}

/// `reload` reads the same file again and swaps the set; a failed reload
/// (bad TOML, a bad value, a deleted file) keeps the set in use.
#[tokio::test]
async fn reload_swaps_the_set_or_keeps_it() {
    let path = std::env::temp_dir().join(format!("redlimit-config-reload-{}.toml", std::process::id()));
    std::fs::write(&path, "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"10/1h\"\n").unwrap();
    assert_eq!(policies::load(&path).unwrap(), 1);
    assert_eq!(policies::get("search"), Some(Policy::fixed_window("10/1h").unwrap()));

    std::fs::write(&path, "[policies.search]\nalgo = \"fixed_window\"\nstrategies = [\n").unwrap();
    let err = policies::reload().unwrap_err();
    assert!(err.to_string().starts_with(&format!("{}:3:", path.display())), "{err}");
    assert_eq!(policies::get("search"), Some(Policy::fixed_window("10/1h").unwrap()), "kept after bad TOML");

    std::fs::write(&path, "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"0/1h\"\n[policies.other]\nalgo = \"gcra\"\nrate = \"1/1s\"\n").unwrap();
    let err = policies::reload().unwrap_err();
    assert!(err.to_string().contains("policy \"search\": strategies \"0/1h\": a limit of 0"), "{err}");
    assert_eq!(policies::get("other"), None, "nothing of a bad file is taken, not even its good policies");

    std::fs::write(&path, "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"20/1h\"\n[policies.other]\nalgo = \"gcra\"\nrate = \"1/1s\"\n").unwrap();
    assert_eq!(policies::reload().unwrap(), 2);
    assert_eq!(policies::get("search"), Some(Policy::fixed_window("20/1h").unwrap()));

    std::fs::remove_file(&path).unwrap();
    assert!(policies::reload().unwrap_err().to_string().contains("cannot read the policies file"));
    assert_eq!(policies::current().len(), 2, "kept after the file disappeared");
}
