//! Prefetch's burst bound holds per key, whatever policy decides it: a key
//! decided under many policies (one per call, `Limiter::with_policy`) holds
//! at most `k - 1` permits in this process, not `k - 1` per policy. Both
//! stores, on a frozen clock, so no permit expires on its own.

use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;

const K: u64 = 8;

#[tokio::test]
async fn a_key_under_ten_policies_never_holds_more_than_k_minus_one_permits() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let base = Policy::fixed_window("1000/1h").unwrap();
        let limiter = Limiter::new(format!("per-key-{store_name}"), base.clone(), store).with_prefetch(K).unwrap();
        // Ten plans of one algorithm: they share the key's count in the store.
        let plans: Vec<Policy> = (0..10).map(|i| Policy::fixed_window(&format!("{}/1h", 1000 + i)).unwrap()).collect();
        let mut admitted = 0;
        for round in 0..3 {
            for (i, plan) in plans.iter().enumerate() {
                // Eight calls in a row: refills of 1, 2, 4 and 8 leave 7 held under one policy.
                for _ in 0..8 {
                    admitted += limiter.with_policy(plan).check("user", 1).await.unwrap().allowed as u64;
                    let stats = limiter.prefetch_stats();
                    let held = stats.prefetched - stats.spent - stats.returned - stats.wasted;
                    assert!(held < K, "{store_name} round {round} plan {i}: {held} permits held for one key");
                    let counted = 1000 - limiter.peek("user", 0).await.unwrap().remaining;
                    assert!(
                        counted - admitted < K,
                        "{store_name} round {round} plan {i}: the store counts {counted} taken for {admitted} admitted"
                    );
                }
            }
        }
        assert_eq!(admitted, 3 * 10 * 8, "{store_name}: far below every plan's limit, nothing is denied");
    }
}

/// A key's one record holds one state's permits: a reset through a policy
/// of another algorithm (a state of its own in the store) leaves them
/// counted there, so they stay here and are spent.
#[tokio::test]
async fn a_reset_of_another_algorithms_state_keeps_the_permits_held_for_this_one() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let bucket = Policy::token_bucket(100, "1/1m").unwrap();
        let limiter = Limiter::new(format!("reset-other-{store_name}"), bucket, store).with_prefetch(K).unwrap();
        for _ in 0..4 {
            limiter.check("k", 1).await.unwrap(); // refills of 1, 2 and 4: 3 held here
        }
        limiter.with_policy(&Policy::gcra("1/1m", 9).unwrap()).reset("k").await.unwrap();
        for _ in 0..3 {
            assert!(limiter.check("k", 1).await.unwrap().allowed, "{store_name}");
        }
        assert_eq!(limiter.peek("k", 0).await.unwrap().remaining, 93, "{store_name}: the 3 were spent here");
        let stats = limiter.prefetch_stats();
        assert_eq!((stats.prefetched, stats.spent, stats.returned), (7, 7, 0), "{store_name}");
    }
}
