use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", colour = "blue")]
async fn unknown() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(algorithm = "gcra", rate = "1/1s")]
async fn renamed() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
