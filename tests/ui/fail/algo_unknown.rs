use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding", strategies = "10/1s")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
