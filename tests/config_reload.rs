//! Reloading policies: a changed limit applies to the next call and keeps the
//! state that still fits; state that cannot fit (another algorithm, another
//! sub-window or bucket unit) is never misread. On both backends.
//!
//! An annotated function reloads by building a new limiter with the same
//! name and the new policy on the same store; these tests do exactly that.
//!
//! `cargo test --test config_reload`

use redis::AsyncCommands;
use redlimit::policies::{self, PolicySet};
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;

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

/// A token bucket stores tokens left, not tokens used: a larger capacity
/// keeps the 3 tokens left (and refills up to the new capacity); a smaller
/// one holds at most its capacity.
#[tokio::test]
async fn a_token_bucket_keeps_its_tokens() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        take(store, &Policy::token_bucket(10, "1/1h").unwrap(), 7).await;
        let raised = Limiter::new("reload", Policy::token_bucket(20, "1/1h").unwrap(), store);
        assert_eq!(raised.check("k", 0).await.unwrap().remaining, 3, "{backend}");
        let lowered = Limiter::new("reload", Policy::token_bucket(2, "1/1h").unwrap(), store);
        assert_eq!(lowered.check("k", 0).await.unwrap().remaining, 2, "{backend}");
        assert!(lowered.check("k", 2).await.unwrap().allowed, "{backend}");
        assert!(!lowered.check("k", 1).await.unwrap().allowed, "{backend}");
    }
}

/// Another precision files counts under other sub-window indexes, and
/// another bucket unit reads amounts at another scale: the new policy
/// starts from a fresh key instead of misreading the old one, which stays
/// untouched (switching back finds it as it was).
#[tokio::test]
async fn a_changed_layout_starts_fresh_and_leaves_the_old_state_alone() {
    let both = BothStores::start().await;
    let changes = [
        // precision 10m -> 1m: the old indexes would read as sub-windows long
        // gone, be deleted by the next write, and the 7 used forgotten
        (
            Policy::sliding_window("10/1h", "10m").unwrap(),
            Policy::sliding_window("10/1h", "1m").unwrap(),
            "redlimit:sliding_window/v1/10m:6:reload:k",
            "redlimit:sliding_window/v1/1m:6:reload:k",
        ),
        // one token = 1h of refill -> 30m: the stored units would read as twice the tokens
        (
            Policy::token_bucket(10, "1/1h").unwrap(),
            Policy::token_bucket(10, "2/1h").unwrap(),
            "redlimit:token_bucket/v1/1h:6:reload:k",
            "redlimit:token_bucket/v1/30m:6:reload:k",
        ),
        (
            Policy::leaky_bucket(10, "1/1h").unwrap(),
            Policy::leaky_bucket(10, "1/2h").unwrap(),
            "redlimit:leaky_bucket/v1/1h:6:reload:k",
            "redlimit:leaky_bucket/v1/2h:6:reload:k",
        ),
        // another algorithm
        (
            Policy::fixed_window("10/1h").unwrap(),
            Policy::sliding_log("10/1h").unwrap(),
            "redlimit:fixed_window/v1:6:reload:k",
            "redlimit:sliding_log/v2:6:reload:k",
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
