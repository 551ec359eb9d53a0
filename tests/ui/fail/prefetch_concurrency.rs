use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "concurrency", limit = 4, prefetch = 10)]
async fn report() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
