use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "100/1s", prefetch = 1)]
async fn one() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "100/1s", prefetch = 0)]
async fn none() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
