//! A bad policies file found lazily (no explicit load): the first call logs
//! every problem once at ERROR, and each call naming a policy is settled by
//! its `on_error`, with a WARN naming the problem at a function's first such
//! call (then at most one line per interval, not one per call). Never a panic.
//!
//! `cargo test --test config_env_broken`

use redlimit::policies::POLICIES_FILE_VAR;
use redlimit::{rate_limit, RateLimited};
use redlimit_test_support::log_capture::LogCapture;

#[rate_limit(policy = "api")]
async fn open() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(policy = "api", on_error = "deny", name = "closed")]
async fn closed() -> Result<(), RateLimited> {
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn a_bad_file_is_reported_once_and_calls_follow_on_error() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    redlimit::init(redlimit::Store::memory()).unwrap();
    let path = std::env::temp_dir().join(format!("redlimit-config-env-broken-{}.toml", std::process::id()));
    std::fs::write(&path, "[policies.api]\nalgo = \"gcra\"\nrate = \"0/1s\"\n[policies.api]\n").unwrap();
    std::env::set_var(POLICIES_FILE_VAR, &path);

    for _ in 0..100 {
        open().await.unwrap();
    }
    let refused = closed().await.unwrap_err();
    assert_eq!(refused.reason(), redlimit::DenialReason::PolicyNotConfigured);
    std::fs::remove_file(&path).unwrap();

    let text = logs.text();
    let problem = format!("{}:4:", path.display());
    assert_eq!(text.matches("ERROR").count(), 1, "{text}");
    assert!(
        text.contains(&format!(
            "rate limit policies could not be loaded; calls naming a policy are settled by their on_error:\n{problem}"
        )),
        "{text}"
    );
    assert_eq!(
        text.matches("policy \"api\" is not configured: the policies could not be loaded: ").count(),
        2,
        "one line per function, not per call: {text}"
    );
    assert_eq!(text.matches("call allowed (on_error = allow)").count(), 1, "{text}");
    assert!(text.contains("call denied (on_error = deny)"), "{text}");
}
