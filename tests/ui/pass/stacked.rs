//! Several attributes on one function stack; they are checked in the order
//! written, and may mix paths (`rate_limit`, `redlimit::rate_limit`).
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "fixed_window", strategies = "2/1m", key = "user:<user>")]
#[redlimit::rate_limit(algo = "fixed_window", strategies = "3/1m", name = "global")]
async fn search(user: u32) -> Result<u32, RateLimited> {
    Ok(user)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert!(search(1).await.is_ok());
    assert!(search(1).await.is_ok());
    let per_user = search(1).await.unwrap_err();
    assert!(per_user.limiter().ends_with("::search"), "{}", per_user.limiter());
    assert!(search(2).await.is_ok(), "the third call overall: the global limit still has room");
    assert_eq!(search(3).await.unwrap_err().limiter(), "global");
}
