#![cfg(feature = "redis")]
//! `on_error`: what an annotated call does when the store cannot answer. The
//! global store is a private `redis-server`, killed halfway (the full outage
//! behaviour of the runtime is tested on its own; this pins the wiring).
//!
//! After the kill the cases use keys the store never denied: a remembered
//! denial is answered locally until its `retry_after`, store or no store.
//!
//! `cargo test --test macro_on_error` (needs `redis-server` on the PATH)

use redlimit::{rate_limit, RateLimited};
use redlimit_test_support::redis_server::RedisServer;
use std::time::{Duration, Instant};

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<k>")]
async fn by_default(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<k>", on_error = "allow")]
async fn allow(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<k>", on_error = "deny")]
async fn deny(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<k>", on_error = "local")]
async fn local(k: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_decides_while_the_store_is_down() {
    let mut server = RedisServer::start();
    redlimit::init(redlimit::Store::redis(&server.url()).await.unwrap()).unwrap();

    // Up: every limit is 1 per hour per key, decided on Redis.
    macro_rules! once_then_denied {
        ($($f:ident),*) => {$(
            $f("up").await.unwrap();
            assert_eq!($f("up").await.unwrap_err().reason(), redlimit::DenialReason::Limited);
        )*};
    }
    once_then_denied!(by_default, allow, deny, local);

    server.kill();
    let started = Instant::now();

    // "allow" (the default too): calls go through, more than the limit admits.
    by_default("down").await.unwrap();
    by_default("down").await.unwrap();
    allow("down").await.unwrap();
    allow("down").await.unwrap();

    // "deny": refused, and the denial says why.
    let refused = deny("down").await.unwrap_err();
    assert_eq!(refused.reason(), redlimit::DenialReason::StoreUnavailable);
    assert_eq!(
        refused.to_string(),
        format!("rate limited by `{}::deny`: the rate limit store is unavailable", module_path!())
    );

    // "local": limited in memory with the same policy (its state starts empty).
    local("down").await.unwrap();
    let limited = local("down").await.unwrap_err();
    assert_eq!(limited.reason(), redlimit::DenialReason::Limited);
    assert!(limited.retry_after().unwrap() > Duration::from_secs(3500));

    assert!(started.elapsed() < Duration::from_secs(5), "each failed call is bounded: {:?}", started.elapsed());
}
