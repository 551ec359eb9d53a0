use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "leaky_bucket", capacity = 0, rate = "1 per second")]
async fn leaky() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
