use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", on_error = "ignore")]
async fn search() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
