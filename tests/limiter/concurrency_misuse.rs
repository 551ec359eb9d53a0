//! A concurrency limiter's permits are held only through `acquire`:
//! `check`, `limit` and `wait` would hold nothing and say allowed, so on
//! both stores they are errors naming `acquire` (never let through by
//! `on_error` or a dry run), a policy given per call included, while
//! `peek` still says how many are free and `acquire` is untouched.
//!
//! `cargo test --test limiter concurrency_misuse::`

use redlimit::{DenialReason, Error, Limiter, OnError, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

#[tokio::test]
async fn check_limit_and_wait_on_a_concurrency_limiter_are_errors_naming_acquire() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let exports = Limiter::new("exports", Policy::concurrency(2, "30s").unwrap(), store);
        for on_error in [OnError::Allow, OnError::Local, OnError::Deny] {
            for dry_run in [false, true] {
                let limiter = exports.clone().with_on_error(on_error).with_dry_run(dry_run);
                let case = format!("{at}, {on_error:?}, dry run {dry_run}");
                match limiter.check("tenant", 1).await {
                    Err(Error::Misuse(why)) => assert!(why.contains("`Limiter::acquire`"), "{case}: {why}"),
                    other => panic!("{case}: check holds nothing, yet answered {other:?}"),
                }
                let refused = limiter.limit("tenant", 1).await.unwrap_err();
                assert_eq!(refused.reason(), DenialReason::Misused, "{case}");
                assert!(
                    refused.to_string().starts_with("`exports` refused the call: `check`, `limit` and `wait`"),
                    "{case}: {refused}"
                );
                assert!(refused.to_string().contains("`Limiter::acquire`"), "{case}: {refused}");
                let waited = limiter.wait("tenant", 1, None).await.unwrap_err();
                assert_eq!(waited.reason(), DenialReason::Misused, "{case}: no wait can make it hold a permit");
            }
        }
        assert_eq!(exports.store_errors(), 0, "{at}: a misuse is not a store failure");

        // None of it held anything: both permits are free (a peek of 1 leaves 1).
        let free = exports.peek("tenant", 1).await.unwrap();
        assert_eq!((free.allowed, free.remaining), (true, 1), "{at}");
        let first = exports.acquire("tenant").await.unwrap();
        let second = exports.acquire("tenant").await.unwrap();
        let free = exports.peek("tenant", 1).await.unwrap();
        assert_eq!((free.allowed, free.remaining), (false, 0), "{at}: peek says none are free");
        assert!(exports.acquire_wait("tenant", Some(Duration::from_millis(1))).await.is_err(), "{at}");
        drop((first, second));
    }
}

#[tokio::test]
async fn a_concurrency_policy_given_per_call_is_held_only_through_acquire() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let api = Limiter::new("api", Policy::gcra("10/1s", 9).unwrap(), store);
        let per_call = api.with_policy(&Policy::concurrency(1, "30s").unwrap());
        assert_eq!(per_call.limit("k", 1).await.unwrap_err().reason(), DenialReason::Misused, "{at}");
        assert!(per_call.check("k", 1).await.is_err(), "{at}");
        let held = per_call.acquire("k").await.unwrap();
        assert!(held.is_held(), "{at}");
        assert!(per_call.acquire("k").await.is_err(), "{at}: one at once");
        assert!(api.limit("k", 1).await.is_ok(), "{at}: the rate policy decides as before");
        drop(held);
    }
}
