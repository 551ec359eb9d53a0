//! `#[rate_limit]` on a real Redis (a private `redis-server` started for this
//! binary): the same cases as `macro_memory.rs`, decided by the Lua scripts
//! with Redis server time.
//!
//! `cargo test --test macro_redis` (needs `redis-server` on the PATH)

#[path = "cases/macro_options/mod.rs"]
mod cases;

use ratelimit_test_support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_option_on_redis() {
    let server = RedisServer::start();
    let store = ratelimit::Store::redis(&server.url()).await.unwrap();
    assert_eq!(store.backend().kind(), "redis");
    ratelimit::init(store).unwrap();
    cases::run_all().await;
    drop(server);
}
