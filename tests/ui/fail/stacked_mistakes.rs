// Mistakes in two stacked attributes are all reported in one build.
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<usr>")]
#[rate_limit(algo = "gcra", rate = "0/1s")]
async fn search(user: u64) -> Result<u64, RateLimited> { Ok(user) }

fn main() {}

// Two stacked limits with one name would count into the same keys.
#[rate_limit(algo = "fixed_window", strategies = "10/1s")]
#[rate_limit(algo = "fixed_window", strategies = "100/1m")]
async fn both_default() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "10/1s", name = "api")]
#[rate_limit(algo = "fixed_window", strategies = "100/1m", name = "api")]
async fn both_api() -> Result<(), RateLimited> { Ok(()) }
