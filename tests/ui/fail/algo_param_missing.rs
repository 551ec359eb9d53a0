use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "token_bucket", rate = "1/1s")]
async fn no_capacity() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_log")]
async fn no_strategies() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
