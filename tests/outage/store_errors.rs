//! A call settled by `on_error` is counted, and a limiter's first failure
//! is logged at WARN (saying whether it was allowed or denied, never the key).

use redlimit::{Limiter, OnError, Policy, RedisOptions, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn store_errors_are_warned_and_counted_without_the_key() {
    let logs = LogCapture::default();
    let _guard = logs.install();

    let mut server = RedisServer::start();
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(100));
    let store = Store::redis_with(&server.url(), options).await.unwrap();
    let allow = Limiter::new("warned", Policy::gcra("1/1s", 0).unwrap(), &store);
    let deny = allow.clone().with_on_error(OnError::Deny);
    // Not a clone: a limiter of its own says its own first failure.
    let deny_apart = Limiter::new("warned", Policy::gcra("1/1s", 0).unwrap(), &store).with_on_error(OnError::Deny);
    server.kill();

    assert!(allow.limit("secret-user-key", 1).await.is_ok());
    let denied = deny.limit("secret-user-key", 1).await.unwrap_err();
    assert_eq!(denied.reason(), redlimit::DenialReason::StoreUnavailable);
    assert_eq!(denied.to_string(), "rate limited by `warned`: the rate limit store is unavailable");
    assert_eq!(allow.store_errors(), 2, "clones share the counter");
    assert!(deny_apart.limit("secret-user-key", 1).await.is_err());

    let text = logs.text();
    assert!(text.contains("WARN") && text.contains("call allowed (on_error = allow)"), "{text}");
    assert_eq!(text.matches(" WARN ").count(), 2, "clones share one outage log: {text}");
    assert!(text.contains("call denied (on_error = deny)"), "{text}");
    assert!(!text.contains("secret-user-key"), "a raw key was logged: {text}");
}
