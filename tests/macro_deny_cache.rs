#![cfg(feature = "redis")]
//! The deny cache behind `#[rate_limit]` on Redis: a denial Redis gave is
//! answered in process (no round trip) until the time Redis said, counting down, and the next call after
//! it reaches Redis again. The global store of this binary is a private
//! `redis-server` on a manual clock.

use redlimit::{rate_limit, ManualClock, RateLimited, Store};
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

#[rate_limit(algo = "gcra", rate = "1/1m", burst = 0, key = "<user>", name = "flooded")]
async fn flooded(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn an_annotated_flood_is_answered_in_process_until_the_time_redis_said() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    redlimit::init(Store::redis(&server.url()).await.unwrap().with_clock(clock.clone())).unwrap();

    flooded("u").await.unwrap();
    let first = flooded("u").await.unwrap_err();
    assert_eq!(first.decision().retry_after, Some(Duration::from_secs(60)), "Redis's own denial");
    let asked = server.evalsha_calls().await;

    for _ in 0..1000 {
        let again = flooded("u").await.unwrap_err();
        assert_eq!(again.decision(), first.decision(), "the remembered denial, unchanged while the clock stands");
    }
    clock.advance(Duration::from_secs(59));
    let later = flooded("u").await.unwrap_err();
    assert_eq!(later.decision().retry_after, Some(Duration::from_secs(1)), "counts down with the clock");
    assert_eq!(server.evalsha_calls().await, asked, "the flood reached Redis");

    // Another user is not answered by u's denial.
    flooded("v").await.unwrap();
    assert_eq!(server.evalsha_calls().await, asked + 1);

    // At the time Redis said, the call reaches Redis, and passes.
    clock.advance(Duration::from_secs(1));
    flooded("u").await.unwrap();
    assert_eq!(server.evalsha_calls().await, asked + 2);
    flooded("u").await.unwrap_err();
    assert_eq!(server.evalsha_calls().await, asked + 3, "the new denial came from Redis");
}
