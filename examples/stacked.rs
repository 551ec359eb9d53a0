//! Stacked limits: one function limited per user *and* globally, by two
//! `#[rate_limit]` attributes, checked in the order written.
//!
//! ```text
//! cargo run --example stacked
//! REDLIMIT_REDIS_URL=redis://127.0.0.1:6379 cargo run --example stacked
//! ```
//!
//! Each user may search 3 times per minute, and everyone together 5 times
//! per minute. It prints one line per call: who called, and which limit (if
//! any) refused, with the error the service's own error type carries.

use redlimit::{rate_limit, Limiter, Policy, RateLimited};
use std::fmt;

/// The service's error type: a denial converts into it, so limited
/// functions keep their signature.
#[derive(Debug)]
enum ApiError {
    TooManyRequests(RateLimited),
}

impl From<RateLimited> for ApiError {
    fn from(denied: RateLimited) -> Self {
        ApiError::TooManyRequests(denied)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::TooManyRequests(denied) => write!(f, "429 Too Many Requests: {denied}"),
        }
    }
}

#[rate_limit(algo = "fixed_window", strategies = "3/1m", key = "user:<user>", name = "search.per_user")]
#[rate_limit(algo = "fixed_window", strategies = "5/1m", name = "search.global")]
async fn search(user: &str, query: &str) -> Result<String, ApiError> {
    Ok(format!("results for {query:?}"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Builds the global store from REDLIMIT_REDIS_URL (memory when unset); a wrong URL stops here.
    let store = redlimit::init_from_env().await?;
    // Start clean even if a previous run left its counts on Redis.
    let per_user = Limiter::new("search.per_user", Policy::fixed_window("3/1m")?, store);
    for user in ["alice", "bob", "carol"] {
        per_user.reset(format!("user:{user}")).await?;
    }
    Limiter::new("search.global", Policy::fixed_window("5/1m")?, store).reset("").await?;
    println!("store: {}; limits: 3/min per user, then 5/min for everyone\n", store.kind());

    let calls = ["alice", "alice", "alice", "alice", "bob", "bob", "carol"];
    for (n, user) in calls.into_iter().enumerate() {
        match search(user, "rust").await {
            Ok(found) => println!("{:>2}. {user:<6} ok: {found}", n + 1),
            Err(ApiError::TooManyRequests(denied)) => {
                let which = if denied.limiter() == "search.per_user" { "per user" } else { "global" };
                println!("{:>2}. {user:<6} refused by the {which} limit: {}", n + 1, ApiError::TooManyRequests(denied));
            }
        }
    }
    println!("\nalice's 4th call was refused per user before the global limit was asked, so it used");
    println!("no global permit: bob's two calls fit in the global 5, and carol's, the 6th, did not.");
    Ok(())
}
