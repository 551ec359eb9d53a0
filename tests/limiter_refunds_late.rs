#![cfg(feature = "redis")]
//! Late refunds of fixed windows: a refund names the call it gives back to,
//! and gives nothing to a window that began after that call's window ended
//! (on a manual clock, on both stores, and on Redis's clock for the counter
//! layout); one inside its window gives back. Through the attribute too:
//! `refund_on = "err"` bodies that fail after their window lend nothing to
//! the next one.

use redlimit::__private::{Answer, Backend, Binding, Bound, Call, CallKind, RedisBackend, Refunded};
use redlimit::{rate_limit, Decision, Limiter, Policy, RedisOptions, Store};
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

async fn allowed(limiter: &Limiter, cost: u64) -> (bool, u64) {
    let decision = limiter.check("k", cost).await.unwrap();
    (decision.allowed, decision.remaining)
}

fn remaining(decision: &redlimit::Decision) -> Vec<u64> {
    decision.quotas.iter().map(|q| q.remaining).collect()
}

#[tokio::test]
async fn a_refund_after_its_window_ended_gives_nothing_to_the_next_window() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let limiter = Limiter::new(format!("after-{at}"), Policy::fixed_window("2/1s").unwrap(), store);
        let first = limiter.check("k", 2).await.unwrap();
        assert!(first.allowed, "{at}");
        both.clock.advance(Duration::from_secs(1));
        assert_eq!(allowed(&limiter, 2).await, (true, 0), "{at}: a new window");
        let after = limiter.refund("k", 2, &first).await.unwrap();
        assert_eq!(after.remaining, 0, "{at}: the first window's permits are not this window's");
        assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}");

        // Two strategies: only the minute counted the first call in the
        // window it holds now, so only the minute gives back.
        let limiter = Limiter::new(format!("after-two-{at}"), Policy::fixed_window("2/1s,5/1m").unwrap(), store);
        let first = limiter.check("k", 2).await.unwrap();
        both.clock.advance(Duration::from_secs(1));
        assert_eq!(allowed(&limiter, 2).await, (true, 0), "{at}");
        let after = limiter.refund("k", 2, &first).await.unwrap();
        assert_eq!(remaining(&after), [0, 3], "{at}: the second's window began after the first call");
        assert!(!limiter.check("k", 1).await.unwrap().allowed, "{at}: the second's window is still full");
        both.clock.advance(Duration::from_secs(1));
        let third = limiter.check("k", 2).await.unwrap();
        assert!(third.allowed, "{at}");
        assert_eq!(remaining(&third), [0, 1], "{at}: 2 + 2 in the minute, thanks to the refund");
    }
}

#[tokio::test]
async fn a_refund_inside_its_window_gives_back() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let limiter = Limiter::new(format!("inside-{at}"), Policy::fixed_window("2/1s").unwrap(), store);
        let first = limiter.check("k", 1).await.unwrap();
        both.clock.advance(Duration::from_millis(999));
        let second = limiter.check("k", 1).await.unwrap();
        assert_eq!((second.allowed, second.remaining), (true, 0), "{at}");
        // The first call's window is the one the key holds: its refund counts.
        assert_eq!(limiter.refund("k", 1, &first).await.unwrap().remaining, 1, "{at}");
        assert_eq!(allowed(&limiter, 1).await, (true, 0), "{at}");
        assert_eq!(allowed(&limiter, 1).await, (false, 0), "{at}");

        let limiter = Limiter::new(format!("inside-two-{at}"), Policy::fixed_window("2/1s,5/1m").unwrap(), store);
        let first = limiter.check("k", 2).await.unwrap();
        both.clock.advance(Duration::from_millis(500));
        let after = limiter.refund("k", 2, &first).await.unwrap();
        assert_eq!(remaining(&after), [2, 5], "{at}: both windows still the first call's");
    }
}

/// Redis's clock, one strategy: the counter layout, whose window Redis
/// times by the key's TTL.
async fn on_redis_clock(server: &RedisServer) -> Store {
    let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
    Store::redis_with(&server.url(), patient).await.unwrap()
}

#[tokio::test]
async fn on_redis_clock_a_counter_refund_after_its_window_ended_gives_nothing() {
    let server = RedisServer::start();
    let store = on_redis_clock(&server).await;
    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let limiter = Limiter::new("late", Policy::fixed_window("5/500ms").unwrap(), &store).with_deny_cache(false);
    let key = "redlimit:fixed_window/v3:4:late:k";
    let first = limiter.check("k", 5).await.unwrap();
    assert!(first.allowed);
    // Redis drops the key when the window ends: at most 501 ms after its
    // first hit, so a wait of any length sees it go.
    for _ in 0..10_000 {
        let exists: bool = redis::cmd("EXISTS").arg(key).query_async(&mut admin).await.unwrap();
        if !exists {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let next = limiter.check("k", 5).await.unwrap();
    assert_eq!((next.allowed, next.remaining), (true, 0), "the next window");
    let after = limiter.refund("k", 5, &first).await.unwrap();
    assert_eq!(after.remaining, 0, "the ended window's permits are not the next window's");
    // Unless the next window ended too (a stalled machine), it still holds its 5.
    let held: Option<u64> = redis::cmd("GET").arg(key).query_async(&mut admin).await.unwrap();
    // (The counter holds its window, in ms, times 2^21 above the count.)
    assert!(held.is_none_or(|held| held % (1 << 21) == 5), "{held:?}");
}

#[tokio::test]
async fn on_redis_clock_a_counter_refund_inside_its_window_gives_back() {
    let server = RedisServer::start();
    let store = on_redis_clock(&server).await;
    let limiter = Limiter::new("inside", Policy::fixed_window("5/1h").unwrap(), &store).with_deny_cache(false);
    let first = limiter.check("k", 5).await.unwrap();
    assert_eq!(limiter.refund("k", 2, &first).await.unwrap().remaining, 2);
    assert_eq!(allowed(&limiter, 2).await, (true, 0));
    assert_eq!(allowed(&limiter, 1).await, (false, 0));
}

async fn ask(bound: &dyn Bound, cost: u64, kind: CallKind) -> Decision {
    match bound.decide(Call { key: b"k", cost, kind }, &redlimit::ServerClock) {
        Answer::Now(outcome) => outcome,
        Answer::Later(answer) => answer.await,
    }
    .unwrap()
}

/// The counter knows its window's end only to the millisecond (now + PTTL):
/// a refund that may be of a window about to end gives nothing.
#[tokio::test]
async fn on_redis_clock_a_counter_refund_in_doubt_gives_nothing() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url(), RedisOptions::default()).await.unwrap();
    let policy = Policy::fixed_window("5/1h").unwrap();
    let bound = backend.bind(Binding { prefix: "redlimit", name: "doubt", policy: &policy, server_clock: true });
    let first = ask(&*bound, 5, CallKind::Check).await;
    assert!(first.allowed);
    // As if the call's window ended half a millisecond after it was taken.
    let running = Refunded::of(&first);
    let ending = Refunded { window_end_us: running.taken_us + 500, ..running };
    assert_eq!(ask(&*bound, 5, CallKind::Refund(ending)).await.remaining, 0);
    assert_eq!(ask(&*bound, 5, CallKind::Refund(running)).await.remaining, 5);
}

#[derive(Debug, PartialEq)]
enum Upstream {
    Failed,
    Limited,
}

impl From<redlimit::RateLimited> for Upstream {
    fn from(_: redlimit::RateLimited) -> Self {
        Upstream::Limited
    }
}

/// Holds the bodies that fail late until the test lets them end.
static LATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);
/// How many bodies that fail late were admitted and run.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

#[rate_limit(algo = "fixed_window", strategies = "5/100ms", name = "late_failures", refund_on = "err")]
async fn upstream(fails_late: bool) -> Result<(), Upstream> {
    if fails_late {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        LATE.acquire().await.unwrap().forget();
        return Err(Upstream::Failed);
    }
    Ok(())
}

/// The reproduction: bodies admitted in one window that fail after
/// it ended, while the next window fills, gave their permits to that next
/// window: 10 successful calls within 160 ms at a limit of 5.
#[tokio::test]
async fn refund_on_err_bodies_that_fail_after_their_window_lend_nothing_to_the_next() {
    let both = BothStores::start().await;
    redlimit::init(both.redis.clone()).unwrap();
    let late: Vec<_> = (0..5).map(|_| tokio::spawn(upstream(true))).collect();
    for _ in 0..10_000 {
        if RUNNING.load(Ordering::SeqCst) == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(RUNNING.load(Ordering::SeqCst), 5, "every late body was admitted");
    assert_eq!(upstream(false).await, Err(Upstream::Limited), "they hold the whole window");

    both.clock.advance(Duration::from_millis(100));
    let mut succeeded = 0;
    for _ in 0..5 {
        succeeded += usize::from(upstream(false).await.is_ok());
    }
    // The late bodies fail now, in the next window, and are refunded.
    LATE.add_permits(5);
    for task in late {
        assert_eq!(task.await.unwrap(), Err(Upstream::Failed));
    }
    both.clock.advance(Duration::from_millis(50));
    for _ in 0..5 {
        succeeded += usize::from(upstream(false).await.is_ok());
    }
    assert_eq!(succeeded, 5, "successful calls within 150 ms at a limit of 5");
}
