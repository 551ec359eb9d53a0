#![cfg(feature = "redis")]
//! `#[rate_limit(policy = "...")]` on a private Redis: the same sequence as
//! `config_macro_memory.rs`, decided by the Lua scripts.
//!
//! `cargo test --test config_macro_redis` (needs `redis-server` on the PATH)

#[path = "cases/config_macro.rs"]
mod cases;

use redlimit_test_support::redis_server::RedisServer;

#[tokio::test(flavor = "current_thread")]
async fn named_policies_on_redis() {
    let server = RedisServer::start();
    let clock = redlimit::ManualClock::new();
    let store = redlimit::Store::redis(&server.url()).await.unwrap().with_clock(clock);
    assert_eq!(store.kind(), "redis");
    redlimit::init(store).unwrap();
    cases::run("redis").await;
    drop(server);
}
