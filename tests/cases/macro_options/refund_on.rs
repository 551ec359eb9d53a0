//! `refund_on = "err"`: a call whose body returns `Err(..)` gives its
//! permits back; one that returns `Ok(..)`, or was denied, does not. The
//! limits are per hour, so no permit comes back by time during a case.

use super::{denied, on_global_store};
use redlimit::{rate_limit, Limiter, Policy, RateLimited};

#[derive(Debug)]
enum UploadError {
    Limited(Box<RateLimited>),
    Upstream,
}

impl From<RateLimited> for UploadError {
    fn from(denied: RateLimited) -> Self {
        UploadError::Limited(Box::new(denied))
    }
}

#[rate_limit(algo = "token_bucket", capacity = 2, rate = "1/1h", key = "<user>", refund_on = "err")]
async fn upload(user: &str, fails: bool) -> Result<&str, UploadError> {
    if fails {
        return Err(UploadError::Upstream);
    }
    Ok(user)
}

/// The count left for `key` under `name` and `policy`, read through a
/// limiter sharing the site's keys (same name and algorithm, global store).
async fn remaining(name: &str, policy: Policy, key: &str) -> u64 {
    let store = redlimit::global().await.unwrap();
    Limiter::new(name, policy, store).peek(key, 0).await.unwrap().remaining
}

#[test]
fn an_err_gives_the_permits_back_and_an_ok_keeps_them() {
    on_global_store(async {
        for _ in 0..5 {
            assert!(matches!(upload("ann", true).await, Err(UploadError::Upstream)));
        }
        assert_eq!(upload("ann", false).await.unwrap(), "ann");
        assert_eq!(upload("ann", false).await.unwrap(), "ann", "five failures cost nothing");
        // A denial took nothing, so it gives nothing back: the next is denied too.
        match upload("ann", false).await {
            Err(UploadError::Limited(denied)) => assert_eq!(denied.decision().remaining, 0),
            other => panic!("expected a denial, got {other:?}"),
        }
        assert!(matches!(upload("ann", true).await, Err(UploadError::Limited(_))));
        assert!(matches!(upload("ann", false).await, Err(UploadError::Limited(_))));
    });
}

#[rate_limit(algo = "fixed_window", strategies = "3/1h", cost = bytes, name = "refund_on.cost", refund_on = "err")]
async fn store_blob(bytes: u32, fails: bool) -> Result<u32, UploadError> {
    if fails {
        return Err(UploadError::Upstream);
    }
    Ok(bytes)
}

#[test]
fn the_cost_taken_is_the_cost_given_back() {
    on_global_store(async {
        let left = || remaining("refund_on.cost", Policy::fixed_window("3/1h").unwrap(), "");
        store_blob(1, false).await.unwrap();
        assert_eq!(left().await, 2);
        assert!(store_blob(2, true).await.is_err());
        assert_eq!(left().await, 2, "the failed call's 2 came back");
        store_blob(2, false).await.unwrap();
        assert_eq!(left().await, 0);
    });
}

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, key = "user:<user>", name = "refund_on.user", refund_on = "err")]
#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, name = "refund_on.global")]
async fn search(user: &str) -> Result<&str, RateLimited> {
    Ok(user)
}

#[test]
fn a_later_attribute_that_denies_gives_back_what_the_earlier_took() {
    on_global_store(async {
        let per_user = |user: &'static str| remaining("refund_on.user", Policy::gcra("1/1h", 0).unwrap(), user);
        assert_eq!(search("ann").await.unwrap(), "ann");
        // Bob passes his own limit, then the global one denies: the body never
        // runs, so his own permit comes back.
        assert_eq!(denied(search("bob").await).limiter(), "refund_on.global");
        assert_eq!(per_user("user:bob").await, 1);
        assert_eq!(per_user("user:ann").await, 0);
    });
}

fn plan(tier: &str) -> Policy {
    match tier {
        "log" => Policy::sliding_log("1/1h").unwrap(),
        _ => Policy::leaky_bucket(1, "1/1h").unwrap(),
    }
}

#[rate_limit(policy = plan(tier), key = "<tier>", name = "refund_on.per_call", refund_on = "err")]
async fn per_tier(tier: &str, fails: bool) -> Result<(), UploadError> {
    if fails {
        return Err(UploadError::Upstream);
    }
    Ok(())
}

#[test]
fn a_policy_given_per_call_refunds_by_that_policy_or_says_once_it_cannot() {
    on_global_store(async {
        for _ in 0..3 {
            assert!(matches!(per_tier("bucket", true).await, Err(UploadError::Upstream)));
        }
        per_tier("bucket", false).await.unwrap();
        assert!(matches!(per_tier("bucket", false).await, Err(UploadError::Limited(_))));
        // A sliding log keeps no refunds: the failed call's permit stays taken.
        assert!(matches!(per_tier("log", true).await, Err(UploadError::Upstream)));
        assert!(matches!(per_tier("log", false).await, Err(UploadError::Limited(_))));
    });
}

#[rate_limit(
    algo = "leaky_bucket",
    capacity = 1,
    rate = "1/1h",
    name = "refund_on.wait",
    on_limit = "wait",
    refund_on = "err"
)]
async fn paced(fails: bool) -> Result<(), ()> {
    if fails {
        return Err(());
    }
    Ok(())
}

#[test]
fn a_call_that_waits_for_its_turn_refunds_too() {
    on_global_store(async {
        for _ in 0..3 {
            assert_eq!(paced(true).await, Err(()));
        }
        // Had a failure kept its permit, this call would wait an hour.
        assert_eq!(paced(false).await, Ok(()));
        assert_eq!(remaining("refund_on.wait", Policy::leaky_bucket(1, "1/1h").unwrap(), "").await, 0);
    });
}

/// What a refunding call keeps across its body's awaits is `Send`, so such
/// functions can still be spawned or serve as axum handlers.
#[test]
fn a_refunding_call_is_still_send() {
    fn send<T: Send>(_: T) {}
    send(upload("ann", false));
    send(per_tier("bucket", false));
    send(search("ann"));
}
