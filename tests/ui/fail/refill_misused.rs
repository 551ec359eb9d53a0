use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "leaky_bucket", capacity = 10, rate = "10/1m", refill = "interval")]
async fn leaky_by_interval() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "gcra", rate = "10/1m", refill = "interval")]
async fn gcra_by_interval() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "10/1m", refill = "hourly")]
async fn unknown_refill() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "token_bucket", capacity = 10, rate = "10/1m", refill = true)]
async fn refill_not_a_string() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
