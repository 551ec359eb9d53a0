//! Two clients whose local clocks differ by seconds (an offset injected into
//! their clock) agree exactly when decisions use Redis server time; with
//! client time, the skew shows up as over-admission. This is why server time
//! is the default.
//!
//! Whatever the clock, a call that arrives late (stamped before a call
//! already recorded for its key) is judged at the recorded time, never
//! before it, on both stores: it can never reopen capacity.

use redlimit::{AlgorithmKind, Clock, Limiter, Policy, ServerClock, Store, SystemClock};
use redlimit_test_support::exactness;
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::stores::BothStores;
use std::time::{Duration, UNIX_EPOCH};

/// This process's clock, off by `offset_us`.
#[derive(Debug)]
struct SkewedClock {
    offset_us: i64,
}

impl Clock for SkewedClock {
    fn now_us(&self) -> Option<u64> {
        SystemClock.now_us().map(|now| now.saturating_add_signed(self.offset_us))
    }
}

/// Client A takes the whole window of one key, then client B asks five
/// times; returns how many of B's calls passed.
async fn second_client_admits(url: &str, a: impl Clock, b: impl Clock, name: &str) -> usize {
    let policy = Policy::fixed_window("5/10s").unwrap();
    let on_a =
        Limiter::new(name, policy.clone(), &Store::redis(url).await.unwrap().with_clock(a)).with_deny_cache(false);
    let on_b = Limiter::new(name, policy, &Store::redis(url).await.unwrap().with_clock(b)).with_deny_cache(false);
    for _ in 0..5 {
        assert!(on_a.check("shared", 1).await.unwrap().allowed);
    }
    let mut passed = 0;
    for _ in 0..5 {
        passed += usize::from(on_b.check("shared", 1).await.unwrap().allowed);
    }
    passed
}

#[tokio::test]
async fn skewed_clients_agree_exactly_on_server_time() {
    let server = RedisServer::start();
    let url = server.url();
    // Server time: the local clocks are never read, so the skew is irrelevant.
    assert_eq!(second_client_admits(&url, ServerClock, ServerClock, "server-time").await, 0);
    // Client time with B's clock 11 s ahead: to B, A's 10 s window has
    // already ended, so B admits a second full window at once.
    assert_eq!(
        second_client_admits(&url, SkewedClock { offset_us: 0 }, SkewedClock { offset_us: 11_000_000 }, "client-time")
            .await,
        5
    );
}

/// Every algorithm with room for 2, on both stores: a call stamped at `T`
/// that arrives after one at `T + 1 s` was recorded.
fn late_policies() -> Vec<Policy> {
    vec![
        Policy::fixed_window("2/10s").unwrap(),
        Policy::fixed_window("2/10s,3/1m").unwrap(),
        Policy::sliding_window("2/10s", "100ms").unwrap(),
        // 20 sub-windows of the ring on Redis.
        Policy::sliding_window("2/2s", "100ms").unwrap(),
        Policy::sliding_log("2/10s").unwrap(),
        Policy::token_bucket(2, "1/10s").unwrap(),
        Policy::leaky_bucket(2, "1/10s").unwrap(),
        Policy::gcra("1/10s", 1).unwrap(),
    ]
}

/// A late call is judged at the latest time its key records, never before
/// it: it gets the answer a call at that time gets, and that time is its
/// `decided_at`. GCRA records no call's time: a late call is judged at its
/// own, against a TAT a later call moved, so it finds no more room.
#[tokio::test]
async fn a_late_call_is_judged_at_the_time_its_key_records() {
    let both = BothStores::start().await;
    let second = Duration::from_secs(1);
    for (backend, store) in both.each() {
        for policy in late_policies() {
            let limiter = Limiter::new(format!("late-{backend}"), policy.clone(), store).with_deny_cache(false);
            let t = redlimit::Clock::now_us(&both.clock).unwrap();
            let at = |us: u64| UNIX_EPOCH + Duration::from_micros(us);
            both.clock.set_us(t + 1_000_000);
            limiter.check("late", 1).await.unwrap();
            limiter.check("on-time", 1).await.unwrap();
            let on_time = limiter.check("on-time", 1).await.unwrap();
            both.clock.set_us(t);
            let late = limiter.check("late", 1).await.unwrap();
            if policy.algorithm() == AlgorithmKind::Gcra {
                assert_eq!(late.decided_at, at(t), "{backend} {policy}");
                assert!(!late.allowed || late.remaining <= on_time.remaining, "{backend} {policy}: {late:?}");
            } else {
                assert_eq!(late, on_time, "{backend} {policy}: answered as at T + 1 s");
                assert_eq!(late.decided_at, at(t + 1_000_000), "{backend} {policy}");
            }
            both.clock.advance(second * 3600);
        }
    }
}

/// The stale read that once reopened a sliding log: two calls at T, one at
/// T + 1.05 s trims them, then a call stamped T + 0.99 s arrives. Judged
/// at its own time against the trimmed log it passed, a third call in the
/// window (T - 0.01 s, T + 0.99 s]; judged at T + 1.05 s it is exact.
#[tokio::test]
async fn a_late_call_never_counts_a_window_a_later_call_trimmed() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        let limiter = Limiter::new("trimmed", Policy::sliding_log("2/1s").unwrap(), store).with_deny_cache(false);
        let t = redlimit::Clock::now_us(&both.clock).unwrap();
        let mut admitted = Vec::new();
        for at in [t, t, t + 1_050_000, t + 990_000, t + 1_050_000] {
            both.clock.set_us(at);
            let d = limiter.check("k", 1).await.unwrap();
            if d.allowed {
                admitted.push((d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64, 1));
            }
        }
        assert_eq!(admitted.len(), 4, "{backend}: the late call passes, at T + 1.05 s, and then the window is full");
        assert_eq!(admitted[3].0, t + 1_050_000, "{backend}");
        assert_eq!(exactness::sliding_log(&admitted, 2, 1_000_000), 0, "{backend}: over-admitted");
        both.clock.set_us(t + 3_600_000_000);
    }
}
