//! `#[rate_limit(policy = "...")]` against the global store: loading, reload
//! (raising, lowering, a failed one), a changed layout, and a policy that is
//! not configured. Run on memory (`config_macro_memory.rs`) and on Redis
//! (`config_macro_redis.rs`), one sequence each, since policies and the
//! store are process-wide.

use redlimit::{policies, rate_limit, RateLimited};
use redlimit_test_support::log_capture::LogCapture;
use std::path::PathBuf;

#[rate_limit(policy = "search", key = "user:<user>")]
async fn search(user: u32) -> Result<u32, RateLimited> {
    Ok(user)
}

#[rate_limit(policy = "feed", name = "cfg.feed")]
async fn feed() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(policy = "later")]
async fn later_allow() -> Result<u32, RateLimited> {
    Ok(7)
}

#[rate_limit(policy = "later", on_error = "deny", name = "cfg.later")]
async fn later_deny() -> Result<u32, RateLimited> {
    Ok(8)
}

struct File(PathBuf);

impl File {
    fn write(&self, search: &str, feed_precision: &str, later: bool) {
        let mut text = format!(
            "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"{search}\"\n\n[policies.feed]\nalgo = \"sliding_window\"\nstrategies = \"3/1h\"\nprecision = \"{feed_precision}\"\n"
        );
        if later {
            text.push_str("\n[policies.later]\nalgo = \"gcra\"\nrate = \"1/1h\"\nburst = 0\n");
        }
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[track_caller]
fn denied<T: std::fmt::Debug>(result: Result<T, RateLimited>) -> RateLimited {
    match result {
        Ok(value) => panic!("expected a denial, got Ok({value:?})"),
        Err(denied) => denied,
    }
}

/// The whole sequence; the global store must be set already.
pub async fn run(backend: &str) {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let file = File(std::env::temp_dir().join(format!("redlimit-config-macro-{backend}-{}.toml", std::process::id())));

    // Loaded at start-up.
    file.write("2/1h", "10m", false);
    assert_eq!(policies::load(&file.0).unwrap(), 2);
    search(1).await.unwrap();
    search(1).await.unwrap();
    assert_eq!(denied(search(1).await).decision().limit, 2);
    assert_eq!(search(2).await.unwrap(), 2, "another key");

    // Raised: the next call sees 4, and the 2 used are still used.
    file.write("4/1h", "10m", false);
    policies::reload().unwrap();
    search(1).await.unwrap();
    search(1).await.unwrap();
    let d = denied(search(1).await);
    assert_eq!((d.decision().limit, d.decision().remaining), (4, 0));
    assert_eq!(d.policy().unwrap().to_string(), "fixed_window 4/1h");

    // Lowered: user 2 used 1 of 1.
    file.write("1/1h", "10m", false);
    policies::reload().unwrap();
    assert_eq!(denied(search(2).await).decision().limit, 1);

    // A failed reload keeps the policy in use.
    std::fs::write(&file.0, "[policies.search]\nalgo = \"fixed_window\"\nstrategies = \"1/1h\"\nburst = 3\n").unwrap();
    let err = policies::reload().unwrap_err();
    assert!(err.to_string().contains("policy \"search\": burst 3: `fixed_window` does not take `burst`"), "{err}");
    search(3).await.unwrap();
    assert_eq!(denied(search(3).await).decision().limit, 1);

    // A changed sub-window length keeps the count: the full window stays full.
    file.write("1/1h", "10m", false);
    policies::reload().unwrap();
    for _ in 0..3 {
        feed().await.unwrap();
    }
    denied(feed().await);
    file.write("1/1h", "1m", false);
    policies::reload().unwrap();
    denied(feed().await);

    // Not configured: settled by on_error, never a panic, with a log line.
    assert_eq!(later_allow().await.unwrap(), 7, "on_error = allow (the default) lets it through");
    let refused = denied(later_deny().await);
    assert_eq!(refused.reason(), redlimit::DenialReason::PolicyNotConfigured);
    assert_eq!(refused.policy(), None);
    assert_eq!(refused.to_string(), "rate limited by `cfg.later`: its named policy is not configured");
    // Again, now that each site has built its limiter for the set in use.
    assert_eq!(later_allow().await.unwrap(), 7);
    assert_eq!(denied(later_deny().await).reason(), redlimit::DenialReason::PolicyNotConfigured);
    let text = logs.text();
    let expected = format!(
        "policy \"later\" is not configured in {} (it has: feed, search); call allowed (on_error = allow)",
        file.0.display()
    );
    assert!(text.contains(&expected), "{text}");
    assert!(text.contains("call denied (on_error = deny)"), "{text}");
    assert!(text.contains("WARN"), "{text}");

    // Configured later: the same functions pick it up.
    file.write("1/1h", "1m", true);
    policies::reload().unwrap();
    assert_eq!(later_deny().await.unwrap(), 8);
    assert_eq!(denied(later_deny().await).reason(), redlimit::DenialReason::Limited, "a real denial now");
    assert_eq!(later_allow().await.unwrap(), 7);
}
