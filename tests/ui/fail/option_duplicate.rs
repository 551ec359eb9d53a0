use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", rate = "2/1s")]
async fn twice() -> Result<(), RateLimited> { Ok(()) }

fn main() {}
