use redlimit::{rate_limit, RateLimited};

#[rate_limit(strategies = "10/1s")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit]
async fn bare() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
