#![cfg(feature = "redis")]
//! The lazy environment route with nothing listening at `REDLIMIT_REDIS_URL`
//! (no start-up call): the first failed connect is reported at ERROR, the
//! background connect keeps trying without a line per call or per attempt,
//! and every annotated call is settled by its `on_error`. Its own binary:
//! the environment and the global store are process-wide.
//!
//! `cargo test --test misconfig_env_unreachable`

use redlimit::REDIS_URL_VAR;
use redlimit_test_support::log_capture::LogCapture;
use redlimit_test_support::redis_server::free_port;
use std::time::{Duration, Instant};

#[path = "cases/env_sites.rs"]
mod sites;
use sites::{allow, deny};

/// Enough pairs of calls, a pause apart, for several connect attempts (they
/// back off from 250 ms).
const CALLS: usize = 40;
const PAUSE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "current_thread")]
async fn nothing_listening_is_reported_once_and_calls_follow_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let port = free_port();
    std::env::set_var(REDIS_URL_VAR, format!("redis://app:s3cret-Pa55@127.0.0.1:{port}"));
    let started = Instant::now();
    for _ in 0..CALLS {
        allow().await.expect("on_error = allow lets the call through");
        deny().await.expect_err("on_error = deny refuses the call");
        tokio::time::sleep(PAUSE).await;
    }
    let elapsed = started.elapsed();

    let text = logs.text();
    let errors: Vec<&str> = text.lines().filter(|line| line.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "one ERROR, not one per call or attempt: {text}");
    println!("{}", errors[0]);
    assert!(errors[0].contains("cannot connect the global rate limit store to Redis"), "{}", errors[0]);
    assert!(
        errors[0].contains(&format!("cannot connect to Redis at redis://app:***@127.0.0.1:{port}")),
        "{}",
        errors[0]
    );
    assert!(!text.contains("s3cret-Pa55"), "the password leaked: {text}");
    assert_eq!(text.matches("call allowed (on_error = allow)").count(), 1, "{text}");
    assert_eq!(text.matches("call denied (on_error = deny)").count(), 1, "{text}");
    // At most a line per 10 s for the connector and for each limiter, besides their first.
    let bound = 2 + 3 * (1 + elapsed.as_secs() as usize / 10);
    let lines = text.lines().filter(|line| line.contains(" WARN ") || line.contains("ERROR")).count();
    assert!(lines <= bound, "{lines} lines for {} calls in {elapsed:?}: {text}", 2 * CALLS);
}
