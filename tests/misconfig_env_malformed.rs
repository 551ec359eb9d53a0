#![cfg(feature = "redis")]
//! The lazy environment route with a malformed `REDLIMIT_REDIS_URL` (no
//! start-up call): each URL form is reported at ERROR once, naming the wrong
//! part and never the password, and every annotated call is settled by its
//! `on_error` (logged, not once per call). Its own binary: the environment
//! and the global store are process-wide.
//!
//! `cargo test --test misconfig_env_malformed`

use redlimit::REDIS_URL_VAR;
use redlimit_test_support::log_capture::LogCapture;

#[path = "cases/env_sites.rs"]
mod sites;
use sites::{allow, deny};

const PASSWORD: &str = "s3cret-Pa55";
const CALLS: usize = 200;

#[tokio::test(flavor = "current_thread")]
async fn a_malformed_url_is_reported_once_and_calls_follow_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let forms = [
        ("redis://app:{pw}@127.0.0.1:x", "invalid port `x` in `127.0.0.1:x`"),
        ("redis+cluster://app:{pw}@10.0.0.1:7000,10.0.0.2:x", "invalid port `x` in `10.0.0.2:x`"),
        ("redis+sentinel://app:{pw}@10.0.0.1:26379", "no master name"),
    ];
    for (n, (url, wrong_part)) in forms.into_iter().enumerate() {
        std::env::set_var(REDIS_URL_VAR, url.replace("{pw}", PASSWORD));
        for _ in 0..CALLS {
            allow().await.expect("on_error = allow lets the call through");
            deny().await.expect_err("on_error = deny refuses the call");
        }
        let text = logs.text();
        let errors: Vec<&str> = text.lines().filter(|line| line.contains("ERROR")).collect();
        assert_eq!(errors.len(), n + 1, "one ERROR per malformed URL, not per call: {text}");
        let error = errors[n];
        println!("{error}");
        assert!(error.contains("REDLIMIT_REDIS_URL is not a usable Redis URL"), "{error}");
        assert!(error.contains(wrong_part) && error.contains("app:***@"), "{error}");
    }
    let text = logs.text();
    assert!(!text.contains(PASSWORD), "the password leaked: {text}");
    // Each limiter says its first settled call at once, then sums up the rest.
    assert_eq!(text.matches("call allowed (on_error = allow)").count(), 1, "{text}");
    assert_eq!(text.matches("call denied (on_error = deny)").count(), 1, "{text}");
    let warnings = text.matches(" WARN ").count();
    assert!(warnings < 20, "{warnings} WARN lines for {} calls: {text}", 2 * 3 * CALLS);
}
