use redlimit::{rate_limit, RateLimited};

fn used(_: &Result<u64, RateLimited>) -> u64 { 1 }

#[rate_limit(algo = "sliding_log", strategies = "5/1m", cost = 3, settle = used)]
async fn login() -> Result<u64, RateLimited> { Ok(1) }

#[rate_limit(algo = "concurrency", limit = 2, settle = used)]
async fn export() -> Result<u64, RateLimited> { Ok(1) }

fn main() {}
