//! `#[rate_limit(prefetch = k)]`: every call of a site spends the quota its
//! calls share, on Redis, and the window stays exact; two `redlimit::scope`s
//! (two stores) never spend each other's permits.

use redlimit::{rate_limit, ManualClock, RateLimited, Store};
use redlimit_test_support::redis_server::RedisServer;

#[rate_limit(name = "prefetched.search", algo = "fixed_window", strategies = "50/1h", prefetch = 8)]
async fn search() -> Result<(), RateLimited> {
    Ok(())
}

async fn passed(calls: usize) -> usize {
    let mut passed = 0;
    for _ in 0..calls {
        passed += search().await.is_ok() as usize;
    }
    passed
}

#[tokio::test]
async fn a_site_spends_its_prefetched_permits_and_each_scope_keeps_its_own() {
    let server = RedisServer::start();
    let redis = Store::redis(&server.url()).await.unwrap().with_clock(ManualClock::new());
    let before = server.evalsha_calls().await;
    assert_eq!(redlimit::scope(redis, passed(80)).await, 50, "the window is exact");
    let calls = server.evalsha_calls().await - before;
    // Refills of 1, 2, 4, then 8 at a time, the last short; then the denials.
    assert!(calls < 20, "{calls} script calls for 80 calls");

    // Another store: none of the first scope's permits, and its own 50.
    let memory = Store::memory().with_clock(ManualClock::new());
    assert_eq!(redlimit::scope(memory, passed(80)).await, 50);
}
