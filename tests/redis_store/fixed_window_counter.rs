//! A fixed window of one strategy on Redis's own clock is a counter whose
//! TTL is the window (`lua/fixed_window_counter.lua`): the same
//! conventions as every other decision, with the window timed by Redis.
//! Time is moved the only way Redis's clock can be: by expiring the key
//! (`PEXPIREAT` in the past), never by sleeping.

use redis::aio::MultiplexedConnection;
use redlimit::{Limiter, ManualClock, Policy, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::sync::Arc;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

struct Setup {
    _server: RedisServer,
    store: Store,
    admin: MultiplexedConnection,
}

async fn setup() -> Setup {
    let server = RedisServer::start();
    let store = Store::redis(&server.url()).await.unwrap();
    let admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    Setup { _server: server, store, admin }
}

fn counter_key(name: &str, key: &str) -> String {
    format!("redlimit:fixed_window/v3:{}:{name}:{key}", name.len())
}

/// The counter's count: it holds the window (ms) it was written under
/// times 2^21, plus the count.
async fn get(admin: &mut MultiplexedConnection, key: &str) -> Option<u64> {
    let held: Option<u64> = redis::cmd("GET").arg(key).query_async(admin).await.unwrap();
    held.map(|v| v % (1 << 21))
}

async fn pttl(admin: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(admin).await.unwrap()
}

#[tokio::test]
async fn admits_exactly_the_limit_and_a_denial_takes_nothing() {
    let mut s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("5/1h").unwrap(), &s.store).with_deny_cache(false);
    for remaining in (0..5).rev() {
        let decision = limiter.check("k", 1).await.unwrap();
        assert!(decision.allowed);
        assert_eq!((decision.limit, decision.remaining, decision.retry_after), (5, remaining, None));
        assert!(decision.reset_after <= HOUR && decision.reset_after > HOUR - Duration::from_secs(60));
    }
    let key = counter_key("api", "k");
    assert_eq!(get(&mut s.admin, &key).await, Some(5));
    let ttl = pttl(&mut s.admin, &key).await;
    assert!((3_540_000..=3_600_000).contains(&ttl), "the window's TTL: {ttl} ms");

    for _ in 0..3 {
        let denied = limiter.check("k", 1).await.unwrap();
        assert!(!denied.allowed);
        assert_eq!((denied.remaining, denied.violated.len()), (0, 1));
        assert_eq!(
            denied.retry_after,
            Some(denied.reset_after + Duration::from_millis(1)),
            "the ms Redis may keep the key"
        );
    }
    assert_eq!(get(&mut s.admin, &key).await, Some(5), "denials took nothing");
    assert!(pttl(&mut s.admin, &key).await <= ttl, "denials did not extend the window");
}

#[tokio::test]
async fn a_cost_above_the_room_left_is_denied_and_takes_nothing() {
    let mut s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("5/1h").unwrap(), &s.store).with_deny_cache(false);
    assert_eq!(limiter.check("k", 4).await.unwrap().remaining, 1);
    let denied = limiter.check("k", 2).await.unwrap();
    assert_eq!(
        (denied.allowed, denied.remaining),
        (false, 1),
        "the count as it stands, not as the denied cost left it"
    );
    assert!(denied.retry_after.is_some(), "a cost the window can hold passes when it ends");
    assert_eq!(get(&mut s.admin, &counter_key("api", "k")).await, Some(4), "the denied cost was given back");
    assert_eq!(limiter.check("k", 1).await.unwrap().remaining, 0, "the one permit left is still there");
}

#[tokio::test]
async fn obeying_retry_after_outlasts_the_window() {
    let mut s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("2/1m").unwrap(), &s.store).with_deny_cache(false);
    limiter.check("k", 2).await.unwrap();
    let denied = limiter.check("k", 1).await.unwrap();
    // Read after the decision: the key has at most this long to live, and
    // Redis drops it 1 ms after its PTTL reaches 0.
    let ttl_after = pttl(&mut s.admin, &counter_key("api", "k")).await;
    let retry = denied.retry_after.expect("a cost the window can hold passes when it ends");
    assert!(
        retry >= Duration::from_millis(ttl_after as u64 + 1),
        "retry {retry:?} before the key goes (PTTL {ttl_after} ms)"
    );
    assert!(retry <= Duration::from_millis(60_001));
}

#[tokio::test]
async fn a_new_window_starts_when_redis_drops_the_key() {
    let mut s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("3/1h").unwrap(), &s.store).with_deny_cache(false);
    limiter.check("k", 3).await.unwrap();
    assert!(!limiter.check("k", 1).await.unwrap().allowed);
    let _: () = redis::cmd("PEXPIREAT").arg(counter_key("api", "k")).arg(1).query_async(&mut s.admin).await.unwrap();
    let fresh = limiter.check("k", 1).await.unwrap();
    assert!(fresh.allowed);
    assert_eq!((fresh.remaining, fresh.reset_after), (2, HOUR), "as for an exact window");
}

#[tokio::test]
async fn peeks_cost_zero_and_costs_above_the_limit_only_read() {
    let mut s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("5/1h").unwrap(), &s.store).with_deny_cache(false);
    let key = counter_key("api", "k");

    let peek = limiter.peek("k", 2).await.unwrap();
    assert!(peek.allowed);
    assert_eq!((peek.remaining, peek.reset_after), (3, HOUR), "as if taken");
    let state = limiter.check("k", 0).await.unwrap();
    assert!(state.allowed);
    assert_eq!((state.remaining, state.reset_after), (5, Duration::ZERO), "untouched");
    let never = limiter.check("k", 6).await.unwrap();
    assert!(!never.allowed);
    assert_eq!((never.remaining, never.retry_after), (5, None), "never passes, so no retry time");
    assert_eq!(get(&mut s.admin, &key).await, None, "nothing written");

    limiter.check("k", 3).await.unwrap();
    let fits = limiter.peek("k", 2).await.unwrap();
    assert_eq!((fits.allowed, fits.remaining), (true, 0));
    let over = limiter.peek("k", 3).await.unwrap();
    assert_eq!(
        (over.allowed, over.remaining, over.retry_after),
        (false, 2, Some(over.reset_after + Duration::from_millis(1)))
    );
    let state = limiter.check("k", 0).await.unwrap();
    assert_eq!(state.remaining, 2);
    assert!(state.reset_after > Duration::ZERO);
    assert_eq!(get(&mut s.admin, &key).await, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_one_key_admit_exactly_the_limit() {
    let s = setup().await;
    let limiter = Limiter::new("api", Policy::fixed_window("50/1h").unwrap(), &s.store).with_deny_cache(false);
    let barrier = Arc::new(tokio::sync::Barrier::new(200));
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let (limiter, barrier) = (limiter.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            limiter.check("k", 1).await.unwrap().allowed
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += usize::from(task.await.unwrap());
    }
    assert_eq!(admitted, 50);
}

#[tokio::test]
async fn a_count_left_by_a_larger_limit_reads_as_none_remaining() {
    let s = setup().await;
    let before = Limiter::new("api", Policy::fixed_window("10/1h").unwrap(), &s.store).with_deny_cache(false);
    before.check("k", 8).await.unwrap();
    let after = Limiter::new("api", Policy::fixed_window("5/1h").unwrap(), &s.store).with_deny_cache(false);
    let denied = after.check("k", 1).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!((denied.limit, denied.remaining), (5, 0));
    assert!(denied.retry_after.is_some());
}

#[tokio::test]
async fn only_one_strategy_on_the_servers_clock_is_a_counter() {
    let mut s = setup().await;
    let key_type = |admin: &mut MultiplexedConnection, key: String| {
        let mut admin = admin.clone();
        async move { redis::cmd("TYPE").arg(key).query_async::<String>(&mut admin).await.unwrap() }
    };
    Limiter::new("one", Policy::fixed_window("5/1h").unwrap(), &s.store).check("k", 1).await.unwrap();
    assert_eq!(key_type(&mut s.admin, counter_key("one", "k")).await, "string");

    Limiter::new("two", Policy::fixed_window("5/1s,50/1h").unwrap(), &s.store).check("k", 1).await.unwrap();
    assert_eq!(key_type(&mut s.admin, "redlimit:fixed_window/v3:3:two:k".into()).await, "hash");

    // A reply that would not fit a double: the hash layout.
    Limiter::new("big", Policy::fixed_window("1000000000/1d").unwrap(), &s.store).check("k", 1).await.unwrap();
    assert_eq!(key_type(&mut s.admin, "redlimit:fixed_window/v3:3:big:k".into()).await, "hash");

    // A client clock: Redis cannot time the window, so the hash with its start.
    let manual = s.store.clone().with_clock(ManualClock::new());
    Limiter::new("manual", Policy::fixed_window("5/1h").unwrap(), &manual).check("k", 1).await.unwrap();
    assert_eq!(key_type(&mut s.admin, "redlimit:fixed_window/v3:6:manual:k".into()).await, "hash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_script_is_loaded_again() {
    let mut s = setup().await;
    let policy = Policy::fixed_window("40/1h").unwrap();
    let limiter = Limiter::new("api", policy.clone(), &s.store).with_deny_cache(false);
    limiter.check("k", 1).await.unwrap();
    let source = redlimit::__private::fixed_window_counter_source(&policy).unwrap();
    let sha = redis::Script::new(&source).get_hash().to_string();
    let exists = |admin: &mut MultiplexedConnection| {
        let (mut admin, sha) = (admin.clone(), sha.clone());
        async move { redis::cmd("SCRIPT").arg("EXISTS").arg(sha).query_async::<Vec<bool>>(&mut admin).await.unwrap()[0] }
    };
    assert!(exists(&mut s.admin).await, "loaded for the counter's first call");

    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut s.admin).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let limiter = limiter.clone();
        tasks.push(tokio::spawn(async move { limiter.check("k", 1).await }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += usize::from(task.await.unwrap().expect("answered after the reload").allowed);
    }
    assert_eq!(admitted, 32);
    assert!(exists(&mut s.admin).await, "loaded again after SCRIPT FLUSH");
    assert_eq!(get(&mut s.admin, &counter_key("api", "k")).await, Some(33));
}

/// Redis's `TIME` in µs.
async fn redis_time(admin: &mut MultiplexedConnection) -> u64 {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(admin).await.unwrap();
    seconds * 1_000_000 + micros
}

#[tokio::test]
async fn every_answer_is_dated_by_redis_time() {
    let mut s = setup().await;
    // The script's own reply: the decision, then Redis's time, two
    // little-endian doubles.
    let source = redlimit::__private::fixed_window_counter_source(&Policy::fixed_window("2/1h").unwrap()).unwrap();
    let before = redis_time(&mut s.admin).await;
    let policy = redlimit::__private::policy_argument(&Policy::fixed_window("2/1h").unwrap(), true);
    let reply: Vec<u8> =
        redis::cmd("EVAL").arg(&source).arg(1).arg("by-hand").arg(policy).query_async(&mut s.admin).await.unwrap();
    let after = redis_time(&mut s.admin).await;
    assert_eq!(reply.len(), 16, "{reply:?}");
    let double = |at: usize| f64::from_le_bytes(reply[at..at + 8].try_into().unwrap());
    let v = double(0) as u64;
    assert_eq!(v / (3_600_000 + 2), 1, "one taken");
    assert!((3_500_000..=3_600_001).contains(&(v % (3_600_000 + 2))), "PTTL + 1, a fresh hour's: {v}");
    let at = double(8) as u64;
    assert!((before..=after).contains(&at), "{before} <= {at} <= {after}");

    // Every kind of answer through a limiter: admitted, denied, a peek.
    let limiter = Limiter::new("dated", Policy::fixed_window("1/1h").unwrap(), &s.store).with_deny_cache(false);
    for (cost, peek) in [(1, false), (1, false), (1, true), (0, false)] {
        let before = redis_time(&mut s.admin).await;
        let d = if peek { limiter.peek("k", cost).await } else { limiter.check("k", cost).await }.unwrap();
        let after = redis_time(&mut s.admin).await;
        let at = d.decided_at.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
        assert!((before..=after).contains(&at), "cost {cost}, peek {peek}: {before} <= {at} <= {after}");
    }
}
