//! A free async fn with a key, a returned denial and `?` in the body.
use redlimit::{rate_limit, RateLimited};

#[derive(Debug)]
enum ApiError {
    Limited(RateLimited),
    NotFound,
}

impl From<RateLimited> for ApiError {
    fn from(denied: RateLimited) -> Self {
        ApiError::Limited(denied)
    }
}

fn lookup(user_id: u64) -> Result<String, ApiError> {
    if user_id == 0 { Err(ApiError::NotFound) } else { Ok(format!("user {user_id}")) }
}

#[rate_limit(algo = "sliding_log", strategies = "1/1m", key = "user:<user_id>")]
async fn profile(user_id: u64) -> Result<String, ApiError> {
    let name = lookup(user_id)?;
    if name.is_empty() {
        return Err(ApiError::NotFound);
    }
    Ok(name)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(profile(7).await.unwrap(), "user 7");
    assert!(matches!(profile(0).await, Err(ApiError::NotFound)));
    assert!(matches!(profile(7).await, Err(ApiError::Limited(_))));
    assert!(profile(8).await.is_ok());
}
