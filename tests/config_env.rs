//! Policies from the environment: `REDLIMIT_POLICIES` (the TOML itself) or
//! `REDLIMIT_POLICIES_FILE` (a path), read on the first call that names a
//! policy when nothing was loaded explicitly. One test: the environment and
//! the policies are process-wide.
//!
//! `cargo test --test config_env`

use redlimit::policies::{self, POLICIES_FILE_VAR, POLICIES_VAR};
use redlimit::{rate_limit, RateLimited};

#[rate_limit(policy = "api", key = "<user>")]
async fn api(user: u32) -> Result<u32, RateLimited> {
    Ok(user)
}

#[tokio::test(flavor = "current_thread")]
async fn the_environment_supplies_the_policies() {
    redlimit::init(redlimit::Store::memory().with_clock(redlimit::ManualClock::new())).unwrap();
    std::env::set_var(POLICIES_VAR, "[policies.api]\nalgo = \"sliding_log\"\nstrategies = \"2/1h\"\n");

    // Lazily, on the first call.
    api(1).await.unwrap();
    api(1).await.unwrap();
    assert_eq!(api(1).await.unwrap_err().decision().limit, 2);
    assert_eq!(policies::current().origin(), POLICIES_VAR);

    // Both set: ambiguous, an error; the set in use stays.
    let path = std::env::temp_dir().join(format!("redlimit-config-env-{}.toml", std::process::id()));
    std::env::set_var(POLICIES_FILE_VAR, &path);
    let err = policies::load_env().unwrap_err();
    assert_eq!(err.to_string(), "REDLIMIT_POLICIES_FILE and REDLIMIT_POLICIES are both set: set one (a path to a TOML file, or the TOML itself)");
    assert_eq!(api(1).await.unwrap_err().decision().limit, 2);

    // The file variable alone; `reload` reads the environment again.
    std::env::remove_var(POLICIES_VAR);
    std::fs::write(&path, "[policies.api]\nalgo = \"sliding_log\"\nstrategies = \"3/1h\"\nrate = \"1/1s\"\n").unwrap();
    let err = policies::reload().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4: policy \"api\": rate \"1/1s\": `sliding_log` does not take `rate`; it takes `strategies`",
            path.display()
        )
    );
    std::fs::write(&path, "[policies.api]\nalgo = \"sliding_log\"\nstrategies = \"3/1h\"\n").unwrap();
    assert_eq!(policies::reload().unwrap(), 1);
    api(1).await.unwrap();
    assert_eq!(api(1).await.unwrap_err().decision().limit, 3, "2 used carried over, then 1 more");
    std::fs::remove_file(&path).unwrap();
}
