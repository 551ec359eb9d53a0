use redlimit::{rate_limit, RateLimited};

#[rate_limit(policy = "search api")]
async fn spaced() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = "")]
async fn empty() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = search)]
async fn not_a_string() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
