use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_window", strategies = "10/1s,100/1m", precision = "700ms")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
