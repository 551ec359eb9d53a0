#![cfg(feature = "redis")]
//! Dry run (shadow mode): a limiter or a policy in dry run decides and
//! records as usual on both stores, and never denies: a call it would deny
//! passes, is counted in `redlimit_dry_run_denials_total` (and as
//! `dry_run_denied`, never `denied`, in `redlimit_decisions_total`). A trial counts what
//! it admitted in a state of its own (limiter/dry_run_trial_count.rs): switched
//! off, the limiter enforces the enforced state, which the trial left alone.

use redlimit::policies::PolicySet;
use redlimit::{DenialReason, Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::metrics_capture::{counter, recorded};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

#[tokio::test]
async fn a_limiter_in_dry_run_never_denies_and_counts_what_it_would_have() {
    drop(recorded());
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let name = format!("dry-{backend}");
        let trial = Limiter::new(name.as_str(), Policy::fixed_window("2/1m").unwrap(), store).with_dry_run(true);
        let mut would_deny = 0;
        for _ in 0..5 {
            let decision = trial.limit("ann", 1).await.expect("a dry run never denies");
            would_deny += u64::from(!decision.allowed);
        }
        let waited = trial.wait("ann", 1, Some(Duration::from_secs(1))).await.expect("nor waits");
        assert!(!waited.allowed, "{backend}");
        assert_eq!(would_deny, 3, "{backend}");
        let labels = [("limiter", name.as_str()), ("algo", "fixed_window")];
        assert_eq!(counter("redlimit_dry_run_denials_total", &labels), 4, "{backend}");
        let outcome =
            |outcome| counter("redlimit_decisions_total", &[("limiter", name.as_str()), ("outcome", outcome)]);
        assert_eq!(
            (outcome("denied"), outcome("dry_run_denied")),
            (0, 4),
            "{backend}: would-be denials, none enforced"
        );
        // Enforced: the same limiter out of dry run, on counts the trial never spent.
        let enforced = trial.clone().with_dry_run(false);
        assert_eq!(enforced.limit("ann", 1).await.unwrap().remaining, 1, "{backend}");
        assert!(enforced.limit("ann", 1).await.is_ok(), "{backend}");
        assert!(enforced.limit("ann", 1).await.is_err(), "{backend}");
        assert!(!trial.check("ann", 1).await.unwrap().allowed, "{backend}: the trial's own count stays");
    }
}

#[tokio::test]
async fn a_policy_in_dry_run_passes_through_any_limiter_that_decides_by_it() {
    let both = BothStores::start().await;
    let set = PolicySet::parse(
        "policies.toml",
        "[policies.trial]\nalgo = \"gcra\"\nrate = \"1/1m\"\ndry_run = true\n[policies.real]\nalgo = \"gcra\"\nrate = \"1/1m\"\n",
    )
    .unwrap();
    let (trial, real) = (set.get("trial").unwrap().clone(), set.get("real").unwrap().clone());
    assert!(trial.is_dry_run() && !real.is_dry_run());
    assert_eq!(trial, real, "a dry run is not a limit: the policies limit alike");
    for (backend, store) in both.each() {
        let limiter = Limiter::new(format!("by-policy-{backend}"), real.clone(), store);
        assert!(limiter.with_policy(&trial).limit("ann", 1).await.is_ok());
        assert!(limiter.with_policy(&trial).limit("ann", 1).await.is_ok(), "{backend}: would deny, passes");
        assert!(limiter.with_policy(&real).limit("ann", 1).await.is_ok(), "{backend}: the trial spent none of it");
        assert!(limiter.with_policy(&real).limit("ann", 1).await.is_err(), "{backend}: enforced on its own count");
    }
    let error =
        PolicySet::parse("p.toml", "[policies.p]\nalgo = \"gcra\"\nrate = \"1/1m\"\ndry_run = \"yes\"\n").unwrap_err();
    assert!(error.to_string().contains("`dry_run` takes true or false"), "{error}");
}

#[tokio::test]
async fn a_dry_run_lets_through_what_on_error_deny_would_deny() {
    let mut server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(200));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let limiter = Limiter::new("dry-deny", Policy::gcra("1/1m", 0).unwrap(), &store).with_on_error(OnError::Deny);
    assert!(limiter.limit("ann", 1).await.is_ok());
    server.kill();
    let denied = limiter.limit("ann", 1).await.unwrap_err();
    assert_eq!(denied.reason(), DenialReason::StoreUnavailable);
    let passed = limiter.clone().with_dry_run(true).limit("ann", 1).await.expect("a dry run never denies");
    assert!(!passed.allowed, "the decision says on_error would have denied");
}
