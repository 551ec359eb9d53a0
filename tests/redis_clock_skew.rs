//! Two clients whose local clocks differ by seconds (an offset injected into
//! their clock) agree exactly when decisions use Redis server time; with
//! client time, the skew shows up as over-admission. This is why server time
//! is the default.

use ratelimit::{Clock, Limiter, Policy, ServerClock, Store, SystemClock};
use ratelimit_test_support::redis_server::RedisServer;

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
