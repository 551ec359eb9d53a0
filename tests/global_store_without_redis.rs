#![cfg(not(feature = "redis"))]
//! Built without the `redis` feature, `REDLIMIT_REDIS_URL` asks for a store
//! this build cannot make: an error naming the feature, logged once at
//! ERROR, and every call settled by its `on_error`; never the memory store.
//!
//! `cargo test --no-default-features --test global_store_without_redis`

use redlimit::Error;
use redlimit_test_support::log_capture::LogCapture;

#[path = "cases/env_sites.rs"]
mod sites;
use sites::{allow, deny};

#[tokio::test(flavor = "current_thread")]
async fn a_redis_url_is_an_error_naming_the_feature_and_calls_follow_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    // Nothing is connected: a build without Redis never opens a socket.
    std::env::set_var(redlimit::REDIS_URL_VAR, "redis://127.0.0.1:1");

    let expected = "REDLIMIT_REDIS_URL is set, but redlimit was built without its `redis` feature";
    for error in [redlimit::global().await.unwrap_err(), redlimit::init_from_env().await.unwrap_err()] {
        assert!(matches!(error, Error::InvalidConfig(_)), "{error:?}");
        assert!(error.to_string().contains(expected), "{error}");
    }

    // A limit of one an hour: the second call would be denied on a real store.
    allow().await.unwrap();
    allow().await.unwrap();
    deny().await.unwrap_err();
    deny().await.unwrap_err();

    let text = logs.text();
    assert_eq!(text.matches("ERROR").count(), 1, "{text}");
    assert!(text.contains(expected), "{text}");
    assert!(!text.contains("decided in memory"), "{text}");
}
