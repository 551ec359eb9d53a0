//! A bucket's or gcra's rate changing on a key: a call denied under the new
//! rate names a `retry_after` that obeying succeeds, whether the rate got
//! faster or slower, on both stores (a manual clock moved by exactly the
//! retry each time).

use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

const ALGORITHMS: [&str; 3] = ["token_bucket", "leaky_bucket", "gcra"];

/// `algo` holding 10 at `rate` (gcra: burst 9).
fn policy(algo: &str, rate: &str) -> Policy {
    match algo {
        "token_bucket" => Policy::token_bucket(10, rate),
        "leaky_bucket" => Policy::leaky_bucket(10, rate),
        _ => Policy::gcra(rate, 9),
    }
    .unwrap()
}

#[tokio::test]
async fn obeying_retry_after_under_a_new_rate_succeeds() {
    let both = BothStores::start().await;
    // Faster, slower, and one whose units do not divide the other's.
    let changes = [("10/1s", "100/1s"), ("100/1s", "10/1s"), ("7/3s", "5/1s"), ("5/1s", "7/3s")];
    for (backend, store) in both.each() {
        for algo in ALGORITHMS {
            for (i, (before, after)) in changes.into_iter().enumerate() {
                let old = Limiter::new(format!("rate-{algo}-{i}"), policy(algo, before), store).with_deny_cache(false);
                let new = old.with_policy(&policy(algo, after));
                assert!(old.check("k", 10).await.unwrap().allowed, "{backend} {algo} {before}");
                both.clock.advance(Duration::from_millis(1));
                // Denied under the new rate, then obeyed to the µs; each admitted
                // call leaves the bucket full again, so the next round is denied.
                for round in 0..3 {
                    let denied = new.check("k", 3).await.unwrap();
                    assert!(!denied.allowed, "{backend} {algo} {before} -> {after}, round {round}: {denied:?}");
                    let retry = denied.retry_after.expect("a cost that fits");
                    both.clock.advance(retry - Duration::from_micros(1));
                    let early = new.peek("k", 3).await.unwrap();
                    assert!(!early.allowed, "{backend} {algo} {before} -> {after}: 1 µs early passes: {early:?}");
                    both.clock.advance(Duration::from_micros(1));
                    let obeyed = new.check("k", 3).await.unwrap();
                    assert!(
                        obeyed.allowed,
                        "{backend} {algo} {before} -> {after}, round {round}: waited {retry:?}, denied: {obeyed:?}"
                    );
                }
            }
        }
    }
}
