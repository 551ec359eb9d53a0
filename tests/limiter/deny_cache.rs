//! The deny cache: a denial is remembered in process until its
//! `retry_after`, so a flooding client costs no round trip, and the cache
//! never admits anything (it only repeats what the store said, until the
//! time the store said).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlimit::{Decision, Limiter, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::Duration;

fn every_algorithm() -> Vec<Policy> {
    vec![
        Policy::fixed_window("3/1s,5/10s").unwrap(),
        Policy::sliding_window("3/1s,5/10s", "100ms").unwrap(),
        Policy::sliding_log("3/1s,5/10s").unwrap(),
        Policy::token_bucket(3, "3/1s").unwrap(),
        Policy::leaky_bucket(3, "3/1s").unwrap(),
        Policy::gcra("3/1s", 2).unwrap(),
    ]
}

/// Takes every permit of `key` and returns the store's first denial.
async fn deny(limiter: &Limiter, key: &str) -> Decision {
    loop {
        let d = limiter.check(key, 1).await.unwrap();
        if !d.allowed {
            return d;
        }
    }
}

#[tokio::test]
async fn a_flood_of_denials_costs_no_round_trip_and_answers_alike_on_both_backends() {
    let both = BothStores::start().await;
    for policy in every_algorithm() {
        let on_memory = Limiter::new("flood", policy.clone(), &both.memory);
        let on_redis = Limiter::new("flood", policy.clone(), &both.redis);
        let first = deny(&on_redis, "k").await;
        assert_eq!(deny(&on_memory, "k").await, first, "{policy}");
        assert!(first.retry_after.is_some(), "{policy}");

        let before = both.server.evalsha_calls().await;
        for _ in 0..1000 {
            assert_eq!(on_redis.check("k", 1).await.unwrap(), first, "{policy}");
            assert_eq!(on_memory.check("k", 1).await.unwrap(), first, "{policy}");
        }
        assert_eq!(both.server.evalsha_calls().await - before, 0, "{policy}: a remembered denial went to Redis");
        both.clock.advance(Duration::from_secs(60));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_several_threads_are_all_answered_by_one_remembered_denial() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("threads", Policy::fixed_window("1/1h").unwrap(), &store);
    deny(&limiter, "k").await;
    let before = server.evalsha_calls().await;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                for _ in 0..20_000 {
                    assert!(!limiter.check("k", 1).await.unwrap().allowed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // A hit written back would date the denial by its own call, and a call
    // on the other thread that read its time just before would miss it.
    assert_eq!(server.evalsha_calls().await - before, 0, "every call answered by the remembered denial");
}

#[tokio::test]
async fn a_remembered_denial_counts_down_and_ends_at_the_time_the_store_said() {
    let both = BothStores::start().await;
    for policy in every_algorithm() {
        for (backend, store) in both.each() {
            let limiter = Limiter::new("countdown", policy.clone(), store);
            let first = deny(&limiter, "k").await;
            let wait = first.retry_after.unwrap();
            let before = both.server.evalsha_calls().await;

            both.clock.advance(wait / 2);
            let later = limiter.check("k", 1).await.unwrap();
            assert!(!later.allowed, "{backend} {policy}");
            assert_eq!(later.retry_after, Some(wait - wait / 2), "{backend} {policy}");
            assert_eq!(later.reset_after, first.reset_after - wait / 2, "{backend} {policy}");
            assert_eq!(
                (later.limit, later.remaining, &later.violated),
                (first.limit, first.remaining, &first.violated),
                "{backend} {policy}"
            );
            assert_eq!(both.server.evalsha_calls().await, before, "{backend} {policy}");

            // At the time the store named, the store decides again, and admits.
            both.clock.advance(wait - wait / 2);
            assert!(limiter.check("k", 1).await.unwrap().allowed, "{backend} {policy}: obeying retry_after failed");
            if backend == "redis" {
                assert_eq!(both.server.evalsha_calls().await, before + 1, "{policy}");
            }
            both.clock.advance(Duration::from_secs(60));
        }
    }
}

/// A denial by two strategies, replayed after the shorter one's own retry
/// time: that strategy no longer fails, so the cached answer drops it and
/// names the other's limit, as the store itself answers then.
#[tokio::test]
async fn a_replayed_denial_drops_the_strategies_that_pass_again() {
    let both = BothStores::start().await;
    let policy = Policy::fixed_window("1/1s,2/10s").unwrap();
    let cached = Limiter::new("replayed", policy.clone(), &both.redis);
    let direct = Limiter::new("replayed", policy.clone(), &both.redis).with_deny_cache(false);
    assert!(cached.check("k", 1).await.unwrap().allowed);
    both.clock.advance(Duration::from_millis(1500));
    assert!(cached.check("k", 1).await.unwrap().allowed);
    both.clock.advance(Duration::from_millis(100));
    let denied = cached.check("k", 1).await.unwrap();
    let names = |d: &Decision| d.violated.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(names(&denied), ["1/1s", "2/10s"]);
    assert_eq!(denied.quotas[0].retry_after, Some(Duration::from_millis(900)));
    assert_eq!(denied.quotas[1].retry_after, Some(Duration::from_millis(8400)));

    // Still within the 1 s strategy's wait: remembered as it was, counted down.
    both.clock.advance(Duration::from_millis(500));
    let before = both.server.evalsha_calls().await;
    let early = cached.check("k", 1).await.unwrap();
    assert_eq!(both.server.evalsha_calls().await, before, "answered from the cache");
    assert_eq!(names(&early), ["1/1s", "2/10s"]);
    assert_eq!(early.quotas[0].retry_after, Some(Duration::from_millis(400)));

    // Past it: only the 10 s strategy still fails, and the cache says so.
    both.clock.advance(Duration::from_millis(500));
    let late = cached.check("k", 1).await.unwrap();
    assert_eq!(both.server.evalsha_calls().await, before, "answered from the cache");
    assert_eq!(names(&late), ["2/10s"]);
    assert_eq!((late.limit, late.remaining, late.retry_after), (2, 0, Some(Duration::from_millis(7400))));
    assert_eq!((late.quotas[0].remaining, late.quotas[0].retry_after), (1, None));
    assert_eq!(late, direct.check("k", 1).await.unwrap(), "the store's own answer at that time");
}

/// Denials consume nothing, so a limiter with the cache and one without see
/// the same states on the same timeline: they must admit exactly the same
/// calls, whatever the costs, steps, peeks and resets.
#[tokio::test]
async fn the_cache_never_admits_more_than_the_policy_allows() {
    let both = BothStores::start().await;
    let mut served_from_cache = 0;
    for (index, policy) in every_algorithm().into_iter().enumerate() {
        for (backend, store) in both.each() {
            let cached = Limiter::new(format!("cached-{index}"), policy.clone(), store);
            let direct = Limiter::new(format!("direct-{index}"), policy.clone(), store).with_deny_cache(false);
            let mut rng = SmallRng::seed_from_u64(index as u64);
            for step in 0..600 {
                match rng.random_range(0..10) {
                    0 => both.clock.advance(Duration::from_micros(rng.random_range(0..2_000_000))),
                    1..=4 => both.clock.advance(Duration::from_micros(rng.random_range(0..50_000))),
                    _ => {}
                }
                let key = format!("user-{}", rng.random_range(0..2));
                let cost = [0, 1, 1, 1, 2, 3, 4][rng.random_range(0..7)];
                let before = both.server.evalsha_calls().await;
                let (a, b) = match rng.random_range(0..30) {
                    0 => {
                        cached.reset(&key).await.unwrap();
                        direct.reset(&key).await.unwrap();
                        continue;
                    }
                    1 | 2 => (cached.peek(&key, cost).await.unwrap(), direct.peek(&key, cost).await.unwrap()),
                    _ => (cached.check(&key, cost).await.unwrap(), direct.check(&key, cost).await.unwrap()),
                };
                assert_eq!(a.allowed, b.allowed, "{backend} {policy} step {step} cost {cost}: {a:?} vs {b:?}");
                if backend == "redis" && both.server.evalsha_calls().await - before == 1 {
                    served_from_cache += 1;
                    assert!(!a.allowed, "only a denial is ever answered from the cache");
                    assert!(a.retry_after <= b.retry_after, "{policy} step {step}: remembered {a:?}, store {b:?}");
                }
            }
        }
    }
    assert!(served_from_cache > 100, "the timelines exercised the cache only {served_from_cache} times");
}

#[tokio::test]
async fn other_costs_peeks_and_cost_zero_are_not_answered_by_a_denial_of_another_cost() {
    let both = BothStores::start().await;
    let limiter = Limiter::new("costs", Policy::token_bucket(3, "1/1s").unwrap(), &both.redis);
    limiter.check("k", 2).await.unwrap();
    let denied = limiter.check("k", 2).await.unwrap();
    assert!(!denied.allowed);
    let before = both.server.evalsha_calls().await;
    assert!(limiter.peek("k", 1).await.unwrap().allowed, "a peek asks the store");
    assert_eq!(limiter.check("k", 0).await.unwrap().remaining, 1, "cost 0 asks the store");
    assert!(!limiter.check("k", 3).await.unwrap().allowed);
    assert!(limiter.check("k", 1).await.unwrap().allowed, "a denial of 2 says nothing about 1");
    assert_eq!(both.server.evalsha_calls().await - before, 4);
}

#[tokio::test]
async fn reset_forgets_a_remembered_denial() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let limiter = Limiter::new("reset", Policy::gcra("1/1h", 0).unwrap(), store);
        deny(&limiter, "k").await;
        assert!(!limiter.check("k", 1).await.unwrap().allowed);
        limiter.reset("k").await.unwrap();
        assert!(limiter.check("k", 1).await.unwrap().allowed, "{backend}: the reset key is still denied");
    }
}

#[tokio::test]
async fn turned_off_every_call_reaches_redis() {
    let both = BothStores::start().await;
    let limiter = Limiter::new("off", Policy::gcra("1/1h", 0).unwrap(), &both.redis).with_deny_cache(false);
    deny(&limiter, "k").await;
    let before = both.server.evalsha_calls().await;
    for _ in 0..100 {
        assert!(!limiter.check("k", 1).await.unwrap().allowed);
    }
    assert_eq!(both.server.evalsha_calls().await - before, 100);
    // And back on: remembered again.
    let limiter = limiter.with_deny_cache(true);
    deny(&limiter, "k").await;
    let before = both.server.evalsha_calls().await;
    limiter.check("k", 1).await.unwrap();
    assert_eq!(both.server.evalsha_calls().await, before);
}

/// With Redis's own clock the cache keeps time with a monotonic clock read
/// before the store was asked, so obeying `retry_after` always reaches the
/// store in time.
#[tokio::test]
async fn with_the_server_clock_a_denial_is_remembered_no_longer_than_the_store_said() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    // A second: the flood and the two INFO round trips must fit in the
    // remembered denial even on a loaded machine.
    let limiter = Limiter::new("server-clock", Policy::gcra("1/1s", 0).unwrap(), &store);
    for _ in 0..3 {
        let denied = deny(&limiter, "k").await;
        let before = server.evalsha_calls().await;
        for _ in 0..100 {
            assert!(!limiter.check("k", 1).await.unwrap().allowed);
        }
        assert_eq!(server.evalsha_calls().await, before, "the flood reached Redis");
        tokio::time::sleep(denied.retry_after.unwrap()).await;
        assert!(limiter.check("k", 1).await.unwrap().allowed, "obeying retry_after failed");
    }
}

/// Regression: a denial remembered for a large cost outlived an admitted
/// smaller cost that changed the state, and named too early a retry time.
#[tokio::test]
async fn an_admitted_call_forgets_the_keys_remembered_denials() {
    let clock = redlimit::ManualClock::new();
    let store = redlimit::Store::memory().with_clock(clock.clone());
    let limiter = redlimit::Limiter::new("forget-on-admit", redlimit::Policy::token_bucket(3, "1/1s").unwrap(), &store);
    let uncached =
        redlimit::Limiter::new("forget-on-admit", redlimit::Policy::token_bucket(3, "1/1s").unwrap(), &store)
            .with_deny_cache(false);
    assert!(limiter.check("k", 2).await.unwrap().allowed);
    assert!(!limiter.check("k", 3).await.unwrap().allowed, "remembered: 1 token left, 3 asked");
    assert!(limiter.check("k", 1).await.unwrap().allowed, "a smaller cost still passes");
    let after = limiter.check("k", 3).await.unwrap();
    assert_eq!(after, uncached.peek("k", 3).await.unwrap(), "the answer is the store's, not the stale memory");
    assert_eq!(after.retry_after, Some(std::time::Duration::from_secs(3)));
}

/// Takes the one permit of `key` on `limiter` (a fixed window of 1 an
/// hour) and has its denial remembered: a check that reaches Redis no more.
async fn denied_and_remembered(server: &RedisServer, limiter: &Limiter, key: &str) {
    assert!(limiter.check(key, 1).await.unwrap().allowed);
    assert!(!limiter.check(key, 1).await.unwrap().allowed);
    let before = server.evalsha_calls().await;
    assert!(!limiter.check(key, 1).await.unwrap().allowed);
    assert_eq!(server.evalsha_calls().await, before, "remembered, answered in process");
}

/// Checks `key` until Redis answers (a call after a restart may meet the
/// dead connection first): bounded by a count, each call by its timeout.
async fn reaches_redis(limiter: &Limiter, key: &str) {
    for _ in 0..50 {
        if limiter.check(key, 1).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("Redis never answered again");
}

/// Redis restarted without persistence holds no state: the first call
/// that reconnects finds a new `run_id`, and the denial remembered from
/// the old server is not served any more, so the customer is decided afresh.
#[tokio::test]
async fn a_denial_is_forgotten_once_a_reconnect_finds_redis_restarted() {
    let mut server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("restart", Policy::fixed_window("1/1h").unwrap(), &store);
    denied_and_remembered(&server, &limiter, "customer").await;

    server.restart();
    reaches_redis(&limiter, "someone else").await;
    let afresh = limiter.check("customer", 1).await.unwrap();
    assert!(afresh.allowed, "the restarted Redis holds no state of the customer: {afresh:?}");
    assert!(!limiter.check("customer", 1).await.unwrap().allowed, "and counts again from there");
}

/// Redis flushed (`FLUSHALL`, here on the test's own server) loses every
/// key without a reconnect: the next call to reach Redis a check interval
/// (one second) after the last check finds one more flush counted in
/// `INFO commandstats`, and remembered denials are not served any more.
#[tokio::test]
async fn a_denial_is_forgotten_once_a_call_finds_redis_flushed() {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let limiter = Limiter::new("flush", Policy::fixed_window("1/1h").unwrap(), &store);
    denied_and_remembered(&server, &limiter, "customer").await;

    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL").query_async(&mut admin).await.unwrap();
    // A lower bound, not a race: a check is due a second after the last one.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    reaches_redis(&limiter, "someone else").await;
    let afresh = limiter.check("customer", 1).await.unwrap();
    assert!(afresh.allowed, "the flushed Redis holds no state of the customer: {afresh:?}");

    // Without a flush, a check finds the same count and the denial stays remembered.
    denied_and_remembered(&server, &limiter, "another customer").await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    reaches_redis(&limiter, "a third").await;
    let before = server.evalsha_calls().await;
    assert!(!limiter.check("another customer", 1).await.unwrap().allowed);
    assert_eq!(server.evalsha_calls().await, before, "still remembered: nothing was lost");
}
