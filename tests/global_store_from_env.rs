#![cfg(feature = "redis")]
//! `init_from_env`, the start-up call: a URL pointing at nothing is a
//! connection failure and a malformed one a configuration error, both
//! returned (within the connect timeout), the global store left unset;
//! unset, the global store is in memory (said once in a log line), and once
//! a global store is set the call says so. One test, because the
//! environment is process-wide; `init_from_env_redis.rs` connects.

use redlimit::{global, init_from_env, Error, REDIS_URL_VAR};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::free_port;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "current_thread")]
async fn the_environment_chooses_the_store() {
    let logs = LogCapture::default();
    let _guard = logs.install();

    // Pointing at nothing: a connection failure naming the URL, within the connect timeout (1 s).
    let vacant = free_port();
    std::env::set_var(REDIS_URL_VAR, format!("redis://127.0.0.1:{vacant}"));
    let started = Instant::now();
    let err = init_from_env().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Connection(_)) && err.is_unavailable(), "{err:?}");
    assert!(err.to_string().starts_with(&format!("cannot connect to Redis at redis://127.0.0.1:{vacant}")), "{err}");

    // Malformed: the wrong part named, no connect tried.
    std::env::set_var(REDIS_URL_VAR, "redis://127.0.0.1:x");
    let err = init_from_env().await.unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("invalid port `x`"), "{err}");

    // Unset: memory, said once however often the global store is asked for.
    std::env::remove_var(REDIS_URL_VAR);
    assert_eq!(global().await.unwrap().kind(), "memory");
    assert_eq!(global().await.unwrap().kind(), "memory");
    let text = logs.text();
    assert_eq!(text.matches("REDLIMIT_REDIS_URL is not set").count(), 1, "{text}");
    assert!(matches!(init_from_env().await, Err(Error::AlreadyInitialized)));
}
