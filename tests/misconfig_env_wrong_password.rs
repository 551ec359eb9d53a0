#![cfg(feature = "redis")]
//! The lazy environment route with a wrong password in `REDLIMIT_REDIS_URL`
//! (no start-up call): reported at ERROR once as refused credentials, never
//! showing the password; every annotated call is settled by its `on_error`.
//! Its own binary: the environment and the global store are process-wide.
//!
//! `cargo test --test misconfig_env_wrong_password`

use redlimit::REDIS_URL_VAR;
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::{free_port, RedisServer};
use std::time::Duration;

#[path = "cases/env_sites.rs"]
mod sites;
use sites::{allow, deny};

const CALLS: usize = 40;

#[tokio::test(flavor = "current_thread")]
async fn a_wrong_password_is_reported_once_and_calls_follow_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let server = RedisServer::start_on(free_port, &["--appendonly", "no", "--requirepass", "s3cret-Pa55"], None);
    std::env::set_var(REDIS_URL_VAR, format!("redis://:not-the-Pa55@127.0.0.1:{}", server.port()));
    for _ in 0..CALLS {
        allow().await.expect("on_error = allow lets the call through");
        deny().await.expect_err("on_error = deny refuses the call");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let text = logs.text();
    let errors: Vec<&str> = text.lines().filter(|line| line.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "one ERROR, not one per call or attempt: {text}");
    println!("{}", errors[0]);
    assert!(errors[0].contains("the credentials were refused"), "{}", errors[0]);
    assert!(!text.contains("not-the-Pa55") && !text.contains("s3cret-Pa55"), "a password leaked: {text}");
    assert_eq!(text.matches("call allowed (on_error = allow)").count(), 1, "{text}");
    assert_eq!(text.matches("call denied (on_error = deny)").count(), 1, "{text}");
}
