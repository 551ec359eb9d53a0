use redlimit::{rate_limit, RateLimited};

fn used(_: &Result<u64, RateLimited>) -> u64 { 1 }

#[rate_limit(algo = "fixed_window", strategies = "100/1m", cost = 10, settle = used, refund_on = "err")]
async fn fetch() -> Result<u64, RateLimited> { Ok(1) }

fn main() {}
