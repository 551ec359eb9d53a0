#![cfg(feature = "redis")]
//! `init_from_env` with `REDLIMIT_REDIS_URL` pointing at a live server: the
//! global store is that Redis, and annotated functions decide on it. Its own
//! binary: the global store is set once per process.

use redlimit::{rate_limit, RateLimited, REDIS_URL_VAR};
use redlimit_test_support::redis_server::RedisServer;

#[rate_limit(algo = "fixed_window", strategies = "2/1h", name = "init_from_env")]
async fn limited() -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn the_start_up_call_installs_redis() {
    let server = RedisServer::start();
    std::env::set_var(REDIS_URL_VAR, server.url());
    let store = redlimit::init_from_env().await.unwrap();
    assert_eq!(store.kind(), "redis");
    assert!(std::ptr::eq(store, redlimit::global().await.unwrap()), "installed as the global store");
    limited().await.unwrap();
    limited().await.unwrap();
    assert!(limited().await.is_err(), "2 per hour, counted on Redis");
    assert_eq!(server.evalsha_calls().await, 3);
    assert!(matches!(redlimit::init_from_env().await, Err(redlimit::Error::AlreadyInitialized)));
}
