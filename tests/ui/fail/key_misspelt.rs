use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", keys = "user:<user_id>")]
async fn misspelt(user_id: u64) -> Result<(), RateLimited> {
    let _ = user_id;
    Ok(())
}

fn main() {}
