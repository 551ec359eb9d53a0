//! Two annotated functions on the global store, one per `on_error` that
//! shows a settled call: what the environment-route tests call. A limit of
//! one an hour, so a second call that passes was settled, not decided.

use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "1/1h", name = "env.allow")]
pub async fn allow() -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", on_error = "deny", name = "env.deny")]
pub async fn deny() -> Result<(), RateLimited> {
    Ok(())
}
