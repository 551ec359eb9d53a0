//! `?` (with an error conversion) and early `return` keep their meaning: the
//! body runs with the function's return type.
use redlimit::{rate_limit, RateLimited};

#[derive(Debug)]
enum AppError {
    Parse(std::num::ParseIntError),
    Limited,
}

impl From<std::num::ParseIntError> for AppError {
    fn from(e: std::num::ParseIntError) -> Self {
        AppError::Parse(e)
    }
}

impl From<RateLimited> for AppError {
    fn from(_: RateLimited) -> Self {
        AppError::Limited
    }
}

#[rate_limit(algo = "gcra", rate = "2/1m", key = "<text>")]
async fn parse(text: &str) -> Result<u32, AppError> {
    if text.is_empty() {
        return Ok(0);
    }
    let n: u32 = text.parse()?;
    Ok(n * 2)
}

#[rate_limit(algo = "gcra", rate = "5/1m")]
async fn boxed_error(text: String) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    let n: u32 = text.parse()?;
    Ok(n)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(parse("").await.unwrap(), 0);
    assert_eq!(parse("21").await.unwrap(), 42);
    assert!(matches!(parse("x").await, Err(AppError::Parse(_))));
    assert_eq!(parse("21").await.unwrap(), 42);
    assert!(matches!(parse("21").await, Err(AppError::Limited)));
    assert_eq!(boxed_error("3".into()).await.unwrap(), 3);
    assert!(boxed_error("x".into()).await.is_err());
}
