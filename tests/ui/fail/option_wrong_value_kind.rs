use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = gcra, capacity = "10", rate = "1/1s")]
async fn kinds() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1s", key)]
async fn bare() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
