use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_log", strategies = "5/1m", refund_on = "err")]
async fn login() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "sliding_window", strategies = "5/1m", precision = "1s", refund_on = "err")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
