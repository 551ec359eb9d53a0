#![cfg(feature = "redis")]
//! `refund_on = "err"` when a refund cannot be made: a WARN, and the
//! function's own result; a call `on_error` let through took nothing, so
//! it gives nothing back; a policy given per call that keeps no refunds is
//! said once. The global store is a private `redis-server`, frozen
//! (SIGSTOP) by one function's body.

use redlimit::{rate_limit, Policy, RedisOptions, Store};
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::RedisServer;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The private server's process, which a body freezes.
static PID: AtomicU32 = AtomicU32::new(0);

fn signal(name: &str) {
    let pid = PID.load(Ordering::Relaxed).to_string();
    assert!(Command::new("kill").args([name, &pid]).status().unwrap().success());
}

#[derive(Debug, PartialEq)]
struct Upstream;

impl From<redlimit::RateLimited> for Upstream {
    fn from(_: redlimit::RateLimited) -> Self {
        panic!("no call of this test is denied")
    }
}

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 5, name = "freezing", refund_on = "err")]
async fn freezes_then_fails() -> Result<(), Upstream> {
    signal("-STOP");
    Err(Upstream)
}

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 5, name = "let_through", refund_on = "err")]
async fn fails() -> Result<(), Upstream> {
    Err(Upstream)
}

fn plan(_: &str) -> Policy {
    Policy::sliding_log("5/1h").unwrap()
}

#[rate_limit(policy = plan(tier), name = "per_call_log", refund_on = "err")]
async fn per_tier(tier: &str) -> Result<(), Upstream> {
    Err(Upstream)
}

#[tokio::test]
async fn refunds_that_cannot_be_made_are_logged_and_change_no_result() {
    let server = RedisServer::start();
    PID.store(server.pid().unwrap(), Ordering::Relaxed);
    let options = RedisOptions::default().with_response_timeout(Duration::from_millis(200));
    redlimit::init(Store::redis_with(&server.url(), options).await.unwrap()).unwrap();
    let logs = LogCapture::default();
    let _guard = logs.install();
    let lines = |text: &str| logs.text().lines().filter(|line| line.contains(text)).count();

    // A policy given per call that keeps no refunds: said once, at WARN.
    assert_eq!(per_tier("free").await, Err(Upstream));
    assert_eq!(per_tier("free").await, Err(Upstream));
    assert_eq!(lines("a refund gives nothing back: a sliding_log policy keeps no refunds"), 1, "{}", logs.text());

    // The store is frozen while the body runs: its refund fails, is logged,
    // and the function still returns its own error.
    assert_eq!(freezes_then_fails().await, Err(Upstream));
    assert_eq!(lines("a refund could not be made, so the call's permits stay taken"), 1, "{}", logs.text());
    assert!(logs.text().lines().any(|l| l.contains("WARN") && l.contains("freezing")), "{}", logs.text());

    // Still frozen: the check is settled by on_error (allow), which took
    // nothing from the store, so no refund is tried.
    assert_eq!(fails().await, Err(Upstream));
    assert_eq!(lines("refund could not be made"), 1, "{}", logs.text());
    signal("-CONT");
}
