use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "1000/1s", prefetch = "100")]
async fn quoted() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "1000/1s", prefetch = 100u32)]
async fn suffixed() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "fixed_window", strategies = "1000/1s", local_quota = 100)]
async fn renamed() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
