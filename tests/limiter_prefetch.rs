#![cfg(feature = "redis")]
//! `Limiter::with_prefetch` in one process, on both stores: a cold key gets
//! the answers it gets without prefetch, a hot key spends locally and a
//! fixed window stays exact, unspent permits are refunded or counted as
//! wasted, and every guarantee of a check still holds (peek, reset,
//! retry_after, metrics, on_error, dry run). Many processes on one hot key:
//! `limiter_prefetch_processes.rs`.

use redlimit::{Error, Limiter, OnError, Policy, Store, DEFAULT_PREFETCH_TTL};
use redlimit_test_support::metrics_capture::{counter, recorded};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

/// Every algorithm that takes prefetch, with denials within a few calls.
fn prefetching() -> Vec<Policy> {
    vec![
        Policy::fixed_window("5/1s").unwrap(),
        Policy::fixed_window("3/1s,7/1m").unwrap(),
        Policy::token_bucket(5, "2/1s").unwrap(),
        Policy::leaky_bucket(5, "2/1s").unwrap(),
        Policy::gcra("2/1s", 3).unwrap(),
    ]
}

#[tokio::test]
async fn a_cold_key_gets_exactly_the_answers_it_gets_without_prefetch() {
    let both = BothStores::start().await;
    // Spaced by more than the prefetch TTL: every refill asks for the call's own cost.
    let spacing = DEFAULT_PREFETCH_TTL + Duration::from_millis(10);
    for (store_name, store) in both.each() {
        for (i, policy) in prefetching().into_iter().enumerate() {
            let plain = Limiter::new(format!("cold-plain-{i}"), policy.clone(), store);
            let prefetched =
                Limiter::new(format!("cold-prefetch-{i}"), policy.clone(), store).with_prefetch(100).unwrap();
            for (step, cost) in
                [1, 1, 2, 1, 3, 1, 1, 1, 2, 1, 1, 4, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1].into_iter().enumerate()
            {
                let expected = plain.check("k", cost).await.unwrap();
                let got = prefetched.check("k", cost).await.unwrap();
                assert_eq!(got, expected, "{store_name} {policy} step {step} cost {cost}");
                both.clock.advance(spacing);
            }
            let stats = prefetched.prefetch_stats();
            assert_eq!((stats.prefetched, stats.returned, stats.wasted), (stats.spent, 0, 0), "{store_name} {policy}");
        }
    }
}

#[tokio::test]
async fn a_hot_key_spends_locally_and_a_fixed_window_stays_exact() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let limiter = Limiter::new(format!("hot-{store_name}"), Policy::fixed_window("50/1s").unwrap(), store)
            .with_prefetch(8)
            .unwrap();
        let before = both.server.evalsha_calls().await;
        let mut admitted = 0;
        for _ in 0..80 {
            admitted += limiter.check("k", 1).await.unwrap().allowed as u32;
        }
        assert_eq!(admitted, 50, "{store_name}");
        let stats = limiter.prefetch_stats();
        assert_eq!((stats.prefetched, stats.spent), (50, 50), "{store_name}: every permit taken was spent");
        if store_name == "redis" {
            let calls = both.server.evalsha_calls().await - before;
            // Refills of 1, 2, 4, then 8 at a time (43 permits in 6), the last short; then the denials.
            assert!(calls < 20, "{calls} script calls for 80 decisions");
        }
        both.clock.advance(Duration::from_secs(1));
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{store_name}: a new window");
    }
}

/// Many tasks on several threads spend one key's local quota at once, the
/// store having nothing left: exactly the permits held here are admitted,
/// each once, and every other call is denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_spending_one_local_quota_at_once_admit_exactly_what_it_holds() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        // Refilled once an hour, on a clock that stands still: no permit comes back or expires meanwhile.
        let policy = Policy::token_bucket(100, "1/1h").unwrap();
        let name = format!("shared-{store_name}");
        let limiter = Limiter::new(name.clone(), policy.clone(), store).with_prefetch(64).unwrap();
        for _ in 0..64 {
            assert!(limiter.check("k", 1).await.unwrap().allowed, "{store_name}: the bucket has room");
        }
        let plain = Limiter::new(name, policy, store);
        while plain.check("k", 1).await.unwrap().allowed {}
        let before = limiter.prefetch_stats();
        let held = before.prefetched - before.spent - before.returned - before.wasted;
        assert!(held >= 16, "{store_name}: {held} held here, too few to share");

        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut admitted = 0u64;
                    for _ in 0..2 * held {
                        admitted += limiter.check("k", 1).await.unwrap().allowed as u64;
                    }
                    admitted
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            admitted += task.await.unwrap();
        }
        assert_eq!(admitted, held, "{store_name}: each held permit admitted once, and nothing more");
        let after = limiter.prefetch_stats();
        assert_eq!(after.spent - before.spent, held, "{store_name}");
        assert_eq!(after.prefetched - after.spent - after.returned - after.wasted, 0, "{store_name}: none held");
        assert_eq!(plain.peek("k", 0).await.unwrap().remaining, 0, "{store_name}: the store gave out nothing more");
    }
}

#[tokio::test]
async fn unspent_permits_are_refunded_when_they_expire_and_wasted_when_their_window_ended() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let bucket = Limiter::new(format!("expire-tb-{store_name}"), Policy::token_bucket(100, "1/1m").unwrap(), store)
            .with_prefetch(8)
            .unwrap();
        for _ in 0..4 {
            bucket.check("k", 1).await.unwrap(); // refills of 1, 2 and 4: 3 held here
        }
        assert_eq!(bucket.peek("k", 0).await.unwrap().remaining, 93, "{store_name}: the store counts them taken");
        both.clock.advance(DEFAULT_PREFETCH_TTL);
        let d = bucket.check("k", 1).await.unwrap();
        assert_eq!(d.remaining, 95, "{store_name}: 3 refunded, then one taken");
        assert_eq!(bucket.prefetch_stats().returned, 3, "{store_name}");

        let window = Limiter::new(format!("expire-fw-{store_name}"), Policy::fixed_window("100/40ms").unwrap(), store)
            .with_prefetch(8)
            .unwrap();
        for _ in 0..4 {
            window.check("k", 1).await.unwrap();
        }
        both.clock.advance(Duration::from_millis(40));
        let d = window.check("k", 1).await.unwrap();
        assert_eq!(d.remaining, 99, "{store_name}: a new window, its first permit");
        let stats = window.prefetch_stats();
        assert_eq!((stats.returned, stats.wasted), (0, 3), "{store_name}: the ended window keeps them");
    }
}

#[tokio::test]
async fn a_dropped_limiter_gives_back_what_it_held() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let policy = Policy::token_bucket(100, "1/1m").unwrap();
        let limiter = Limiter::new(format!("dropped-{store_name}"), policy.clone(), store).with_prefetch(8).unwrap();
        for _ in 0..4 {
            limiter.check("k", 1).await.unwrap(); // 7 taken, 3 held here
        }
        drop(limiter);
        let after = Limiter::new(format!("dropped-{store_name}"), policy, store);
        let mut remaining = 0;
        for _ in 0..100 {
            // The refund runs on a task of its own.
            remaining = after.peek("k", 0).await.unwrap().remaining;
            if remaining == 96 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(remaining, 96, "{store_name}: the 3 held are given back");
    }
}

#[tokio::test]
async fn peek_is_answered_by_the_store_and_reset_forgets_local_permits() {
    let both = BothStores::start().await;
    for (store_name, store) in both.each() {
        let limiter = Limiter::new(format!("peek-{store_name}"), Policy::gcra("1/1m", 9).unwrap(), store)
            .with_prefetch(8)
            .unwrap();
        for _ in 0..4 {
            limiter.check("k", 1).await.unwrap();
        }
        assert_eq!(limiter.peek("k", 1).await.unwrap().remaining, 2, "{store_name}: 7 taken in the store");
        limiter.reset("k").await.unwrap();
        let d = limiter.check("k", 1).await.unwrap();
        assert_eq!(d.remaining, 9, "{store_name}: a fresh key, nothing held from before");
        assert_eq!(limiter.prefetch_stats().returned, 3, "{store_name}: the reset gave them back");
    }
}

#[tokio::test]
async fn denials_keep_their_retry_after_and_metrics_count_each_decision() {
    let both = BothStores::start().await;
    drop(recorded());
    for (store_name, store) in both.each() {
        let name = format!("denials-{store_name}");
        let plain = Limiter::new(format!("denials-plain-{store_name}"), Policy::gcra("10/1s", 4).unwrap(), store);
        let limiter = Limiter::new(name.clone(), Policy::gcra("10/1s", 4).unwrap(), store).with_prefetch(100).unwrap();
        let mut denied = 0;
        for _ in 0..12 {
            let (got, expected) = (limiter.check("k", 1).await.unwrap(), plain.check("k", 1).await.unwrap());
            assert_eq!(got.allowed, expected.allowed, "{store_name}");
            if !got.allowed {
                assert_eq!(got.retry_after, expected.retry_after, "{store_name}");
                assert_eq!(got.retry_after, Some(Duration::from_millis(100)), "{store_name}");
                denied += 1;
            }
        }
        assert_eq!(denied, 7, "{store_name}");
        let outcome =
            |outcome| counter("redlimit_decisions_total", &[("limiter", name.as_str()), ("outcome", outcome)]);
        assert_eq!((outcome("allowed"), outcome("denied")), (5, 7), "{store_name}: one count per call");
        let kind = |kind| counter("redlimit_prefetch_permits_total", &[("limiter", name.as_str()), ("kind", kind)]);
        assert_eq!((kind("prefetched"), kind("spent")), (5, 5), "{store_name}");
    }
}

#[tokio::test]
async fn on_error_settles_a_refill_that_cannot_be_taken_and_dry_run_lets_denials_through() {
    let mut server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let policy = Policy::fixed_window("2/1h").unwrap();
    let open = Limiter::new("outage-open", policy.clone(), &store).with_prefetch(8).unwrap();
    let trial = Limiter::new("outage-trial", policy.clone(), &store).with_prefetch(8).unwrap().with_dry_run(true);
    for _ in 0..5 {
        assert!(trial.limit("k", 1).await.is_ok(), "a dry run denies nothing");
    }
    assert!(!trial.check("k", 1).await.unwrap().allowed, "the window is exact underneath");
    server.kill();
    assert!(matches!(open.check("k", 1).await, Err(Error::Connection(_) | Error::Unavailable(_) | Error::Timeout(_))));
    assert!(open.limit("k", 1).await.unwrap().allowed, "on_error = allow lets it through");
    let closed = open.clone().with_on_error(OnError::Deny);
    assert!(closed.limit("k", 1).await.is_err(), "on_error = deny refuses it");
}

#[tokio::test]
async fn sliding_windows_logs_and_concurrency_refuse_prefetch_and_one_permit_is_none() {
    let store = Store::memory();
    for policy in [
        Policy::sliding_log("3/1m").unwrap(),
        Policy::sliding_window("3/1m", "1s").unwrap(),
        Policy::concurrency(3, "30s").unwrap(),
    ] {
        let refused = Limiter::new("refused", policy.clone(), &store).with_prefetch(100).unwrap_err();
        assert!(matches!(refused, Error::InvalidConfig(_)), "{policy}: {refused}");
        assert!(refused.to_string().contains("cannot prefetch"), "{policy}: {refused}");
    }
    let off = Limiter::new("off", Policy::gcra("1/1s", 9).unwrap(), &store).with_prefetch(1).unwrap();
    for _ in 0..3 {
        off.check("k", 1).await.unwrap();
    }
    assert_eq!(off.prefetch_stats().prefetched, 0);
}

/// A layer built from a limiter with prefetch spends that limiter's local
/// quota: a hot key behind `RateLimitLayer` keeps its window exact in a
/// fraction of the script calls.
#[tokio::test]
async fn a_layer_built_from_a_prefetching_limiter_spends_locally() {
    use axum::routing::get;
    use axum::Router;
    use redlimit::http::{KeyBy, RateLimitLayer};
    use redlimit_test_support::http::{from, send};

    let both = BothStores::start().await;
    let limiter =
        Limiter::new("layer-hot", Policy::fixed_window("50/1s").unwrap(), &both.redis).with_prefetch(8).unwrap();
    let layer = RateLimitLayer::from_limiter(limiter.clone()).key(KeyBy::header("x-api-key").unwrap());
    let mut app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    let before = both.server.evalsha_calls().await;
    let mut passed = 0;
    for _ in 0..80 {
        passed += (send(&mut app, from("192.0.2.1:1000", &[("x-api-key", "hot")])).await.status() == 200) as u32;
    }
    assert_eq!(passed, 50, "the window stays exact");
    let calls = both.server.evalsha_calls().await - before;
    assert!(calls < 20, "{calls} script calls for 80 requests");
    assert_eq!(limiter.prefetch_stats().spent, 50);
}
