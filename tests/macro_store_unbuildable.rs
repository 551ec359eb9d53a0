//! `on_error` when the global store cannot even be built (Redis unreachable
//! at the first call): the call is settled by `on_error`, never a panic, and
//! `on_limit = "wait"` still waits on the local limiter.
//!
//! `cargo test --test macro_store_unbuildable`

use redlimit::{rate_limit, RateLimited};
use std::time::{Duration, Instant};

#[rate_limit(algo = "fixed_window", strategies = "1/1h")]
async fn allow() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", on_error = "deny")]
async fn deny() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", on_error = "local")]
async fn local() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "gcra", rate = "1/200ms", burst = 0, on_error = "local", on_limit = "wait")]
async fn local_wait() -> Instant {
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_settles_calls_while_the_store_cannot_be_built() {
    let vacant = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::env::set_var(redlimit::REDIS_URL_VAR, format!("redis://127.0.0.1:{vacant}"));

    // The store connects in the background; each call waits for it at most
    // the response timeout.
    allow().await.unwrap();

    let refused = deny().await.unwrap_err();
    assert_eq!(refused.reason(), redlimit::DenialReason::StoreUnavailable, "{refused}");

    local().await.unwrap();
    assert_eq!(local().await.unwrap_err().reason(), redlimit::DenialReason::Limited);

    let first = local_wait().await;
    let second = local_wait().await;
    assert!(second - first >= Duration::from_millis(150), "waited on the local limiter: {:?}", second - first);
}
