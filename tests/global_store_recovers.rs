#![cfg(feature = "redis")]
//! The global store's Redis is down at the first call and comes up later:
//! calls are settled by `on_error` at once meanwhile, and decided by Redis
//! once it is up, with no restart. One test, because the environment is
//! process-wide.

use redlimit::{rate_limit, RateLimited};
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::time::{Duration, Instant};

#[rate_limit(algo = "fixed_window", strategies = "1000/1h", on_error = "deny")]
async fn deny() -> Result<(), RateLimited> {
    Ok(())
}

/// The 250 ms the global store waits for a connection, and scheduling slack.
const BOUND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_decided_by_redis_once_it_comes_up() {
    let port = free_port();
    std::env::set_var(redlimit::REDIS_URL_VAR, format!("redis://127.0.0.1:{port}"));
    for _ in 0..10 {
        let started = Instant::now();
        let refused = deny().await.expect_err("nothing listens: on_error = deny refuses");
        assert_eq!(refused.reason(), redlimit::DenialReason::StoreUnavailable, "{refused}");
        assert!(started.elapsed() < BOUND, "a call took {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let server = RedisServer::start_with(port, &["--appendonly", "no"], None);
    // The background connect backs off to at most 4 s between attempts.
    let mut settled = 0;
    while deny().await.is_err() {
        settled += 1;
        assert!(settled < 300, "Redis was not used after {settled} calls 50 ms apart");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server.evalsha_calls().await >= 1, "decided on Redis");
    println!("decided by Redis after {settled} calls settled by on_error");
}
