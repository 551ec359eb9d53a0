use redlimit::{rate_limit, RateLimited};

#[derive(Debug)]
pub enum ApiError { Limited(RateLimited) }
impl From<RateLimited> for ApiError {
    fn from(e: RateLimited) -> Self { ApiError::Limited(e) }
}

#[rate_limit(algo = "sliding_log", key = "user:<user_id>", strategies = "10/1s,100/1m")]
pub async fn get_profile(user_id: u64) -> Result<String, ApiError> {
    Ok(format!("profile of {user_id}"))
}
