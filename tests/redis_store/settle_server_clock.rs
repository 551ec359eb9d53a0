//! Settlements on Redis's own clock, where a fixed window of one strategy
//! is `lua/fixed_window_counter.lua`'s counter: a charge counts past the
//! limit in each form the key may hold (the counter, the hash of one
//! window another script wrote, the hash that keeps an earlier policy's
//! windows), read back from the key itself.

use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HOUR: Duration = Duration::from_secs(3600);

fn storage_key(name: &str, key: &str) -> String {
    format!("redlimit:fixed_window/v3:{}:{name}:{key}", name.len())
}

async fn connect(server: &RedisServer) -> (Store, MultiplexedConnection) {
    let store = Store::redis(&server.url()).await.unwrap();
    let admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    (store, admin)
}

/// The counter's count (below one unit of window, 2^21).
async fn counted(admin: &mut MultiplexedConnection, key: &str) -> u64 {
    let held: u64 = redis::cmd("GET").arg(key).query_async(admin).await.unwrap();
    held % (1 << 21)
}

async fn field(admin: &mut MultiplexedConnection, key: &str, name: &str) -> u64 {
    redis::cmd("HGET").arg(key).arg(name).query_async(admin).await.unwrap()
}

#[tokio::test]
async fn a_counter_counts_an_overage_past_its_limit_and_a_refund_below_it() {
    let server = RedisServer::start();
    let (store, mut admin) = connect(&server).await;
    let limiter = Limiter::new("llm", Policy::fixed_window("10/1h").unwrap(), &store).with_deny_cache(false);
    let (first, second) = (limiter.reserve("k", 4).await.unwrap(), limiter.reserve("k", 4).await.unwrap());
    let after = first.settle(13).await.unwrap();
    assert_eq!((after.allowed, after.remaining), (false, 0));
    assert!(after
        .retry_after
        .is_some_and(|r| r > HOUR - Duration::from_secs(60) && r <= HOUR + Duration::from_millis(2)));
    assert_eq!(counted(&mut admin, &storage_key("llm", "k")).await, 17, "8 reserved, 9 over");
    assert!(limiter.reserve("k", 1).await.is_err(), "owed");
    second.settle(1).await.unwrap();
    assert_eq!(counted(&mut admin, &storage_key("llm", "k")).await, 14, "3 given back");
    // A settlement that starts the window (an estimate of 0 on a fresh key).
    let fresh = limiter.reserve("fresh", 0).await.unwrap();
    assert_eq!(fresh.settle(12).await.unwrap().remaining, 0);
    assert_eq!(counted(&mut admin, &storage_key("llm", "fresh")).await, 12);
    let ttl: i64 = redis::cmd("PTTL").arg(storage_key("llm", "fresh")).query_async(&mut admin).await.unwrap();
    assert!(ttl > 3_000_000 && ttl <= 3_600_000, "the window's TTL: {ttl}");
    // A huge overage stays below the counter's unit of window: the window keeps its length.
    let huge = limiter.reserve("huge", 1).await.unwrap();
    assert_eq!(huge.settle(u64::MAX).await.unwrap().remaining, 0);
    assert_eq!(counted(&mut admin, &storage_key("llm", "huge")).await, (1 << 21) - 1);
    assert!(!limiter.check("huge", 1).await.unwrap().allowed);
}

#[tokio::test]
async fn a_charge_on_a_hash_of_one_window_makes_it_the_counter() {
    let server = RedisServer::start();
    let (store, mut admin) = connect(&server).await;
    // A client clock's store writes fixed_window.lua's hash at the same key.
    let now_us = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
    let client = store.clone().with_clock(ManualClock::starting_at(now_us));
    let policy = Policy::fixed_window("10/1h").unwrap();
    Limiter::new("mixed", policy.clone(), &client).check("k", 2).await.unwrap();
    assert_eq!(field(&mut admin, &storage_key("mixed", "k"), "c1").await, 2);
    let limiter = Limiter::new("mixed", policy, &store).with_deny_cache(false);
    let reservation = limiter.reserve("k", 0).await.unwrap();
    assert_eq!(reservation.decision().remaining, 8, "an estimate of 0 reads the hash, writing nothing");
    assert_eq!(reservation.settle(11).await.unwrap().remaining, 0);
    assert_eq!(counted(&mut admin, &storage_key("mixed", "k")).await, 13);
}

#[tokio::test]
async fn a_charge_counts_in_the_windows_an_earlier_policy_left() {
    let server = RedisServer::start();
    let (store, mut admin) = connect(&server).await;
    let two = Limiter::new("kept", Policy::fixed_window("10/1h,30/2h").unwrap(), &store).with_deny_cache(false);
    two.check("k", 2).await.unwrap();
    let one = two.with_policy(&Policy::fixed_window("10/1h").unwrap());
    let reservation = one.reserve("k", 3).await.unwrap();
    let after = reservation.settle(12).await.unwrap();
    assert_eq!((after.allowed, after.remaining), (false, 0));
    let key = storage_key("kept", "k");
    assert_eq!((field(&mut admin, &key, "c1").await, field(&mut admin, &key, "c2").await), (14, 14));
    assert!(two.reserve("k", 1).await.is_err(), "the first window is over its limit");
    assert_eq!(two.peek("k", 0).await.unwrap().quotas[1].remaining, 16, "the second counted it too");
}
