//! Generic functions (type and lifetime parameters, `impl Trait` arguments,
//! `where` clauses): one site is shared by every instantiation.
use redlimit::{rate_limit, RateLimited};
use std::fmt::Display;

#[rate_limit(algo = "sliding_window", strategies = "2/1m", key = "<id>")]
async fn generic<T: Display + Send, U>(id: T, extra: U) -> Result<U, RateLimited>
where
    U: Send,
{
    Ok(extra)
}

#[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "<name>:<tag>")]
async fn borrowed<'a>(name: &'a str, tag: impl Display) -> Result<&'a str, RateLimited> {
    Ok(name)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(generic(1u8, "a").await.unwrap(), "a");
    assert_eq!(generic("1", 2.5).await.unwrap(), 2.5, "same key text, same limit");
    assert!(generic(1u32, ()).await.is_err());
    assert_eq!(borrowed("x", 1).await.unwrap(), "x");
    assert!(borrowed("x", 1).await.is_err());
}
