use redlimit::{rate_limit, RateLimited};

// Renewed every third of its lease: shorter than 100ms cannot be kept.
#[rate_limit(algo = "concurrency", limit = 2, lease = "4ms")]
async fn four_milliseconds() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 2, lease = "99ms")]
async fn just_too_short() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algo = "concurrency", limit = 2, lease = "100ms")]
async fn shortest() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
