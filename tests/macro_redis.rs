#![cfg(feature = "redis")]
//! `#[rate_limit]` on a real Redis (a private `redis-server` started for this
//! binary): the same cases as `macro_memory.rs`, decided by the Lua scripts
//! with Redis server time, one test per case.
//!
//! `cargo test --test macro_redis` (needs `redis-server` on the PATH; one
//! case: `cargo test --test macro_redis a_literal_cost`)

#[path = "cases/macro_options/mod.rs"]
mod cases;

use once_cell::sync::OnceCell;
use redlimit_test_support::redis_server::RedisServer;
use redlimit_test_support::runtime;
use std::future::Future;
use std::sync::Once;

/// Runs one case on this binary's runtime, the global store being a private
/// Redis. The first case to come starts the server and connects on that
/// runtime, which lives as long as the process, so the connection serves
/// every later case; the server is killed when the process ends.
fn on_global_store<F: Future>(case: F) -> F::Output {
    static SERVER: OnceCell<RedisServer> = OnceCell::new();
    static STORE: Once = Once::new();
    STORE.call_once(|| {
        let server = SERVER.get_or_init(RedisServer::start);
        let store = runtime::block_on(redlimit::Store::redis(&server.url())).unwrap();
        assert_eq!(store.kind(), "redis");
        redlimit::init(store).unwrap();
    });
    runtime::block_on(case)
}
