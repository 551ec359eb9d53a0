use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "10/1s", capacity = 5)]
async fn window_with_capacity() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "1/1s", precision = "100ms")]
async fn gcra_with_precision() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
