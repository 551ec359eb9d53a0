use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_log", strategies = "5/1m", prefetch = 100)]
async fn login() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_window", strategies = "5/1m", precision = "1s", prefetch = 100)]
async fn search() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
