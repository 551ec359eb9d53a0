#![cfg(feature = "redis")]
//! `Limiter::refund` on both stores, one call at a time: a refunded permit
//! can be used again, a refund never fills past the policy, a fixed window
//! gives back only while its window runs, and the algorithms without
//! refunds say why. Batches holding refunds are in `redis_store/refund_batches.rs`.

use redlimit::{Error, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::metrics_capture::{counter, histogram_samples, recorded};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Every refunding algorithm, each admitting 3 at once and refilling
/// slowly enough that no test step gains a permit by time.
fn refunding() -> Vec<Policy> {
    vec![
        Policy::token_bucket(3, "1/1m").unwrap(),
        Policy::leaky_bucket(3, "1/1m").unwrap(),
        Policy::gcra("1/1m", 2).unwrap(),
        Policy::fixed_window("3/1m").unwrap(),
        Policy::fixed_window("3/1m,5/1h").unwrap(),
    ]
}

/// The memory store, Redis with batching (the default) and Redis without.
async fn stores(both: &BothStores) -> Vec<(&'static str, Store)> {
    let unbatched = RedisOptions::default().with_batching(false);
    let unbatched = Store::redis_with(&both.server.url(), unbatched).await.unwrap().with_clock(both.clock.clone());
    vec![("memory", both.memory.clone()), ("redis", both.redis.clone()), ("redis unbatched", unbatched)]
}

async fn allowed(limiter: &Limiter, cost: u64) -> (bool, u64) {
    let decision = limiter.check("k", cost).await.unwrap();
    (decision.allowed, decision.remaining)
}

#[tokio::test]
async fn a_refunded_permit_can_be_used_again_and_a_refund_never_fills_past_the_policy() {
    let both = BothStores::start().await;
    for (store_name, store) in stores(&both).await {
        for (i, policy) in refunding().into_iter().enumerate() {
            let limiter = Limiter::new(format!("used-{store_name}-{i}"), policy.clone(), &store);
            let at = format!("{store_name} {policy}");
            let taken = limiter.check("k", 3).await.unwrap();
            assert_eq!((taken.allowed, taken.remaining), (true, 0), "{at}");
            assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}");

            let after = limiter.refund("k", 1, &taken).await.unwrap();
            assert_eq!((after.allowed, after.remaining, after.retry_after), (true, 1, None), "{at}");
            assert_eq!(limiter.peek("k", 0).await.unwrap(), after, "{at}: the refund reports what a peek of 0 sees");
            assert_eq!(allowed(&limiter, 1).await, (true, 0), "{at}: the refunded permit is used again");
            assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}: and only it");

            // Far more than was taken: back to full, never past it.
            assert_eq!(limiter.refund("k", 1_000, &taken).await.unwrap().remaining, 3, "{at}");
            assert_eq!(limiter.refund("k", u64::MAX, &taken).await.unwrap().remaining, 3, "{at}");
            let again = limiter.check("k", 3).await.unwrap();
            assert_eq!((again.allowed, again.remaining), (true, 0), "{at}");
            assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}: a refund past full gave nothing more");

            // An untouched key has nothing to give back, and stays untouched.
            let fresh = limiter.refund("fresh", 2, &taken).await.unwrap();
            assert_eq!((fresh.remaining, fresh.reset_after), (3, Duration::ZERO), "{at}");
            assert_eq!(limiter.refund("k", 0, &again).await.unwrap().remaining, 0, "{at}: a refund of 0 reports");
        }
    }
}

#[tokio::test]
async fn a_fixed_window_refund_after_its_window_ended_gives_nothing_back() {
    let both = BothStores::start().await;
    for (store_name, store) in stores(&both).await {
        let at = store_name;
        let limiter = Limiter::new(format!("ended-{store_name}"), Policy::fixed_window("2/1s").unwrap(), &store);
        let taken = limiter.check("k", 2).await.unwrap();
        assert_eq!((taken.allowed, taken.remaining), (true, 0), "{at}");
        both.clock.advance(Duration::from_secs(1));
        let after = limiter.refund("k", 2, &taken).await.unwrap();
        assert_eq!((after.remaining, after.reset_after), (2, Duration::ZERO), "{at}: nothing runs, nothing given");
        assert_eq!(allowed(&limiter, 2).await, (true, 0), "{at}");
        assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}: the old window's refund lent nothing to this one");

        // Two strategies: the second's window ended, the minute's still runs.
        let policy = Policy::fixed_window("2/1s,3/1m").unwrap();
        let limiter = Limiter::new(format!("ended-two-{store_name}"), policy, &store);
        let taken = limiter.check("k", 2).await.unwrap();
        assert_eq!((taken.allowed, taken.remaining), (true, 0), "{at}");
        both.clock.advance(Duration::from_secs(1));
        let after = limiter.refund("k", 1, &taken).await.unwrap();
        let quotas: Vec<u64> = after.quotas.iter().map(|q| q.remaining).collect();
        assert_eq!(quotas, [2, 2], "{at}: the minute's count went from 2 to 1; the second's had nothing");
        assert_eq!(allowed(&limiter, 2).await, (true, 0), "{at}: 1 + 2 fit the minute only thanks to the refund");
        assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}");
    }
}

#[tokio::test]
async fn a_refund_under_a_policy_given_per_call_keeps_the_key_and_its_own_numbers() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let limiter = Limiter::new(format!("per-call-{store_name}"), Policy::token_bucket(2, "1/1m").unwrap(), store);
        let bigger = Policy::token_bucket(5, "1/1m").unwrap();
        let taken = limiter.with_policy(&bigger).check("k", 5).await.unwrap();
        assert_eq!(taken.remaining, 0, "{store_name}");
        let after = limiter.with_policy(&bigger).refund("k", 4, &taken).await.unwrap();
        assert_eq!((after.limit, after.remaining), (5, 4), "{store_name}");
        // Under the limiter's own policy the key keeps what it owes: 1 token missing.
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 1, "{store_name}");

        // A refund under a policy that keeps none is refused, whatever the limiter's own.
        let log = Policy::sliding_log("5/1m").unwrap();
        assert!(matches!(limiter.with_policy(&log).refund("k", 1, &taken).await, Err(Error::InvalidConfig(_))));
    }
}

#[tokio::test]
async fn algorithms_without_refunds_say_why_and_take_nothing() {
    let both = BothStores::start().await;
    let policies = [Policy::sliding_window("3/1m", "1s").unwrap(), Policy::sliding_log("3/1m").unwrap()];
    for (store_name, store) in stores(&both).await {
        for policy in &policies {
            let limiter = Limiter::new(format!("refused-{store_name}"), policy.clone(), &store);
            let taken = limiter.check("k", 3).await.unwrap();
            let error = limiter.refund("k", 1, &taken).await.unwrap_err();
            assert!(matches!(error, Error::InvalidConfig(_)), "{store_name} {policy}: {error:?}");
            assert_eq!(
                error.to_string(),
                format!(
                    "a {} limiter cannot give permits back: it records when each permit \
                     was taken, and a refund cannot say which; refunds work with fixed_window, token_bucket, \
                     leaky_bucket and gcra",
                    policy.algorithm()
                )
            );
            assert!(!limiter.check("k", 1).await.unwrap().allowed, "{store_name} {policy}: nothing was given back");
        }
    }
}

#[tokio::test]
async fn a_refund_forgets_the_denials_the_deny_cache_remembers() {
    let both = BothStores::start().await;
    // The deny cache takes part on Redis only; on by default.
    let limiter = Limiter::new("cached", Policy::gcra("1/1h", 0).unwrap(), &both.redis);
    let taken = limiter.check("k", 1).await.unwrap();
    assert!(taken.allowed);
    let denied = limiter.check("k", 1).await.unwrap();
    assert!(!denied.allowed && denied.retry_after.is_some());
    limiter.refund("k", 1, &taken).await.unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed, "answered by the store, not the remembered denial");
}

/// On Redis's clock a fixed window of one strategy is a counter whose TTL
/// is the window: a refund to zero keeps that window, as the hash does.
#[tokio::test]
async fn a_counter_window_refunded_to_zero_keeps_running() {
    let both = BothStores::start().await;
    let store = Store::redis(&both.server.url()).await.unwrap();
    let mut admin = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let limiter = Limiter::new("counter", Policy::fixed_window("3/1h").unwrap(), &store);
    let key = "redlimit:fixed_window/v3:7:counter:k";
    let taken = limiter.check("k", 3).await.unwrap();
    assert_eq!((taken.allowed, taken.remaining), (true, 0));
    // A window with 30 s left: one started again would last an hour.
    let () = redis::cmd("PEXPIRE").arg(key).arg(30_000).query_async(&mut admin).await.unwrap();

    let after = limiter.refund("k", 5, &taken).await.unwrap();
    assert_eq!(after.remaining, 3);
    assert!(after.reset_after > Duration::ZERO && after.reset_after <= Duration::from_secs(30), "{after:?}");
    let held: Option<u64> = redis::cmd("GET").arg(key).query_async(&mut admin).await.unwrap();
    // The counter holds its window, in ms, times 2^21 above the count.
    assert_eq!(held.map(|v| v % (1 << 21)), Some(0));

    let next = limiter.check("k", 1).await.unwrap();
    assert_eq!((next.allowed, next.remaining), (true, 2));
    assert!(next.reset_after <= Duration::from_secs(30), "the window started again: {next:?}");
    assert_eq!(allowed(&limiter, 2).await, (true, 0));
    assert_eq!(allowed(&limiter, 1).await, (false, 0));

    // An untouched key has nothing to give back: no key is made.
    assert_eq!(limiter.refund("fresh", 1, &taken).await.unwrap().remaining, 3);
    let exists: bool =
        redis::cmd("EXISTS").arg("redlimit:fixed_window/v3:7:counter:fresh").query_async(&mut admin).await.unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn a_refund_is_not_a_decision_in_the_metrics() {
    drop(recorded());
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let name = format!("uncounted.{store_name}");
        let limiter = Limiter::new(name.as_str(), Policy::gcra("1/1h", 0).unwrap(), store);
        let taken = limiter.check("k", 1).await.unwrap();
        for _ in 0..3 {
            limiter.refund("k", 1, &taken).await.unwrap();
        }
        let decisions =
            |outcome| counter("redlimit_decisions_total", &[("limiter", name.as_str()), ("outcome", outcome)]);
        assert_eq!((decisions("allowed"), decisions("denied")), (1, 0), "{store_name}");
        let timed = histogram_samples("redlimit_store_duration_seconds", &name).len();
        assert_eq!(timed, usize::from(store_name == "redis"), "{store_name}: only the check is timed");
    }
}
