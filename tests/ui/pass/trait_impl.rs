//! Native `async fn` in a trait impl (Rust 1.75+), with `Self::Error`.
use redlimit::{rate_limit, RateLimited};

trait Store {
    type Error;
    async fn get(&self, key: &str) -> Result<String, Self::Error>;
}

struct Cache;

impl Store for Cache {
    type Error = RateLimited;

    #[rate_limit(algo = "sliding_log", strategies = "1/1m", key = "<key>", name = "cache.get")]
    async fn get(&self, key: &str) -> Result<String, Self::Error> {
        Ok(key.to_uppercase())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(Cache.get("a").await.unwrap(), "A");
    assert!(Cache.get("a").await.is_err());
}
