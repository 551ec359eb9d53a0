//! A dry-run trial counts in a state of its own, on both stores: beside the
//! enforced policy of the same limiter name and key it spends none of that
//! policy's count, and it reports what it alone would have done (denials
//! after its own limit). A trial by policy (`Policy::with_dry_run` through
//! `with_policy`), by limiter (`Limiter::with_dry_run`) and by layer
//! (`RateLimitLayer::dry_run`) alike; the attribute's is in macros/dry_run.rs.

use axum::routing::get;
use axum::Router;
use redlimit::http::{KeyBy, RateLimitLayer};
use redlimit::{Limiter, Policy};
use redlimit_test_support::http::{request, send};
use redlimit_test_support::stores::BothStores;

fn window(limit: u32) -> Policy {
    Policy::fixed_window(&format!("{limit}/1m")).unwrap()
}

/// Ten rounds of one trial call and one enforced call on the key `ann`:
/// the trial would deny its 6th to 10th, the enforced policy admits all
/// ten, then denies; and each still reads its own count.
async fn a_trial_beside_the_enforced_policy(enforced: &Limiter, trial: &Limiter, at: &str) {
    let mut would_deny = Vec::new();
    for n in 1..=10 {
        let tried = trial.limit("ann", 1).await.expect("a dry run never denies");
        if !tried.allowed {
            would_deny.push(n);
        }
        assert!(enforced.limit("ann", 1).await.is_ok(), "{at}: the enforced policy's call {n} of 10");
    }
    assert_eq!(would_deny, [6, 7, 8, 9, 10], "{at}: the trial denies after its own 5");
    assert!(enforced.limit("ann", 1).await.is_err(), "{at}: the enforced 10 are spent, by its own calls");
    assert_eq!(trial.peek("ann", 1).await.unwrap().remaining, 0, "{at}: the trial's 5");
    assert_eq!(trial.peek("bob", 1).await.unwrap().remaining, 4, "{at}");
}

#[tokio::test]
async fn a_trial_policy_leaves_the_enforced_policy_all_its_permits() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new("by-policy", window(10), store);
        let trial = enforced.with_policy(&window(5).with_dry_run(true));
        a_trial_beside_the_enforced_policy(&enforced, &trial, at).await;
    }
}

#[tokio::test]
async fn a_limiter_in_dry_run_leaves_the_enforced_limiter_of_its_name_all_its_permits() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new("by-limiter", window(10), store);
        let trial = Limiter::new("by-limiter", window(5), store).with_dry_run(true);
        a_trial_beside_the_enforced_policy(&enforced, &trial, at).await;
        // Out of dry run, the limiter enforces the enforced count, spent by the ten.
        assert!(trial.clone().with_dry_run(false).limit("ann", 1).await.is_err(), "{at}");
        assert!(trial.with_dry_run(false).check("carol", 1).await.unwrap().allowed, "{at}");
    }
}

/// The same numbers in trial and enforced: the trial's denials, remembered
/// in the deny cache they share on Redis, are never served to the enforced
/// policy, nor the other way round.
#[tokio::test]
async fn a_trial_of_the_same_policy_neither_spends_nor_denies_the_enforced_one() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new("same-numbers", window(3), store);
        let trial = enforced.with_policy(&window(3).with_dry_run(true));
        for _ in 0..3 {
            assert!(trial.limit("ann", 1).await.unwrap().allowed, "{at}");
        }
        assert!(!trial.limit("ann", 1).await.unwrap().allowed, "{at}: would deny, remembered on Redis");
        for n in 1..=3 {
            assert!(enforced.limit("ann", 1).await.is_ok(), "{at}: enforced call {n} of 3");
        }
        assert!(enforced.limit("ann", 1).await.is_err(), "{at}");
        let tried = trial.limit("ann", 1).await.unwrap();
        assert_eq!((tried.allowed, tried.remaining), (false, 0), "{at}: the trial's own count");
    }
}

/// A layer in dry run is a trial of its limiter's policy: its requests, let
/// through past its limit, leave the enforced limiter of that name untouched.
#[tokio::test]
async fn a_layer_in_dry_run_leaves_the_enforced_limiter_all_its_permits() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new("by-layer", window(10), store);
        let trial = Limiter::new("by-layer", window(5), store);
        let layer = RateLimitLayer::from_limiter(trial.clone()).key(KeyBy::header("x-api-key").unwrap()).dry_run(true);
        let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
        for n in 1..=8 {
            let response = send(&mut app, request("/", &[("x-api-key", "ann")])).await;
            assert_eq!(response.status().as_u16(), 200, "{at}: request {n}, let through");
        }
        for n in 1..=10 {
            assert!(enforced.limit("ann", 1).await.is_ok(), "{at}: the enforced limiter's call {n} of 10");
        }
        assert!(enforced.limit("ann", 1).await.is_err(), "{at}");
        let tried = trial.with_dry_run(true).peek("ann", 1).await.unwrap();
        assert_eq!((tried.allowed, tried.remaining), (false, 0), "{at}: the layer's trial counted its own 5");
    }
}

/// A trial holds concurrency permits of its own: a trial at its limit
/// leaves the enforced limit free, and the other way round.
#[tokio::test]
async fn a_concurrency_trial_holds_none_of_the_enforced_permits() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let policy = Policy::concurrency(1, "30s").unwrap();
        let enforced = Limiter::new("by-lease", policy.clone(), store);
        let trial = enforced.with_policy(&policy.with_dry_run(true));
        let tried = trial.acquire("ann").await.unwrap();
        assert!(tried.is_held(), "{at}");
        let held = enforced.acquire("ann").await.expect("the trial holds none of the enforced permit");
        assert!(held.is_held(), "{at}");
        let second = trial.acquire("ann").await.expect("a dry run never denies");
        assert!(!second.decision().allowed && !second.is_held(), "{at}: the trial's own limit of 1");
        drop((tried, held, second));
    }
}

/// A reset forgets the state of the policy it is called through: the
/// enforced count's reset leaves the trial's, and the trial's the enforced one.
#[tokio::test]
async fn a_reset_forgets_only_its_own_policys_state() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let enforced = Limiter::new("resets", window(2), store);
        let trial = enforced.clone().with_dry_run(true);
        for _ in 0..2 {
            enforced.limit("ann", 1).await.unwrap();
            trial.limit("ann", 1).await.unwrap();
        }
        enforced.reset("ann").await.unwrap();
        assert!(!trial.check("ann", 1).await.unwrap().allowed, "{at}: the trial's count stays");
        trial.reset("ann").await.unwrap();
        assert_eq!(trial.check("ann", 1).await.unwrap().remaining, 1, "{at}");
        assert_eq!(enforced.check("ann", 1).await.unwrap().remaining, 1, "{at}: reset once, by its own");
    }
}
