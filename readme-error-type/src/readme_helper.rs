#[rate_limit(algo = "token_bucket", capacity = 3, rate = "1/1h", key = "<user>", name = "uploads")]
pub async fn upload(user: &str) -> Result<(), RateLimited> {
    Ok(())
}
