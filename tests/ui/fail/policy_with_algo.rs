use redlimit::{rate_limit, RateLimited};

// The named policy brings its own algorithm and parameters.
#[rate_limit(policy = "search", algo = "gcra", rate = "1/1s")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

#[rate_limit(policy = "uploads", capacity = 5)]
async fn upload() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
