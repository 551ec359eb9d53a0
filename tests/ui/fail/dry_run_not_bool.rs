use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<user>", dry_run = "yes")]
async fn search(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(algo = "gcra", rate = "1/1s", key = "<user>", shadow_mode = true)]
async fn lookup(user: u64) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
