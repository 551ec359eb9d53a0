use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "leaky_bucket", capacity = 5, rate = "1/1s", on_limit = "wait", max_wait = "2 seconds")]
async fn shaped() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "leaky_bucket", capacity = 5, rate = "1/1s", max_wait = "2s")]
async fn without_wait() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
